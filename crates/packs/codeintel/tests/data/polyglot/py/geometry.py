import math


class Rect:
    """An axis-aligned rectangle."""

    def __init__(self, w, h):
        self.w = w
        self.h = h

    def area(self):
        """Width times height."""
        return self.w * self.h


def total_area(shapes):
    return sum(shape.area() for shape in shapes)


def hypot(a, b):
    return math.sqrt(a * a + b * b)
