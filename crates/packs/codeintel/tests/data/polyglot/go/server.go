package server

// Handler serves areas.
type Handler struct{}

// Area answers one request.
func (h Handler) Area(w float64) float64 {
	return Square(w)
}

func Square(x float64) float64 {
	return x * x
}
