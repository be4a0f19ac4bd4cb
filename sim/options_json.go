package sim

import (
	"bytes"
	"encoding/json"
	"fmt"

	engprof "github.com/tpscope/tpscope/engine"
)

// UnmarshalJSON reads Options as their struct tags write them, strictly
// (an unknown field is an error, as in DecodeScenario), and also the
// field scenarios recorded before engine profiles wrote for tpscope's
// executor, "executor": true, as Engine = engprof.ExecutorRef.
func (o *Options) UnmarshalJSON(data []byte) error {
	type plain Options // no methods: no recursion
	var v struct {
		plain
		Executor *bool `json:"executor,omitempty"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("options: %w", err)
	}
	*o = Options(v.plain)
	if v.Executor != nil && *v.Executor {
		if !o.Engine.IsZero() && !o.Engine.IsExecutor() {
			return fmt.Errorf("options: executor true and engine %s: want one engine", o.Engine)
		}
		o.Engine = engprof.ExecutorRef
	}
	return nil
}
