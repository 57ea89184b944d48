interface Shape {
  area(): number;
}

function describe(shape: Shape): string {
  return render(shape);
}
