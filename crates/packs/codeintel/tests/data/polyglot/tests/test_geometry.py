from py.geometry import Rect, total_area


def test_area():
    assert Rect(2, 3).area() == 6
    assert total_area([Rect(1, 1)]) == 1
