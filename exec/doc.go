// Package exec runs a Schedule on N ranks through a Backend and times every op.
package exec
