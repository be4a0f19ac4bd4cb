package topology

// pathTable holds the precomputed path between every ordered GPU pair.
type pathTable struct{}
