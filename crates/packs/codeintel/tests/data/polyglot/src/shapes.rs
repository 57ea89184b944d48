/// A circle of radius `r`.
pub struct Circle {
    pub r: f64,
}

impl Circle {
    /// The area of the circle.
    pub fn area(&self) -> f64 {
        square(self.r) * 3.14
    }
}

fn square(x: f64) -> f64 {
    x * x
}

pub fn total_area(circles: &[Circle]) -> f64 {
    circles.iter().map(|c| c.area()).sum()
}
