package sim

import "fmt"

// Decoders of the names MarshalText writes, so a saved prediction
// ('tpscope predict --output json') reads back into a Prediction.

// UnmarshalText reads a bound's name ("none", "compute", "memory",
// "latency", "link"); any other text is an error naming the names.
func (b *Bound) UnmarshalText(text []byte) error {
	for i, n := range boundNames {
		if string(text) == n {
			*b = Bound(i)
			return nil
		}
	}
	return fmt.Errorf("bound %q: want one of %v", text, boundNames)
}

// UnmarshalText reads what released an op ("start", "launch", "dep",
// "stream", "peer"); any other text is an error naming the names.
func (w *Wait) UnmarshalText(text []byte) error {
	for i, n := range waitNames {
		if string(text) == n {
			*w = Wait(i)
			return nil
		}
	}
	return fmt.Errorf("wait %q: want one of %v", text, waitNames)
}
