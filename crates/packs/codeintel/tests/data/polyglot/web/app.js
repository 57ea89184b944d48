// Renders a shape's area.
function render(shape) {
  return `area: ${shape.area()}`;
}

class Square {
  constructor(side) {
    this.side = side;
  }
  area() {
    return this.side * this.side;
  }
}

console.log(render(new Square(2)));
