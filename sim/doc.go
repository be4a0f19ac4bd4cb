// Package sim predicts the time of a Schedule on a topology: compute
// roofline per op, NCCL collective costs, and a discrete-event engine.
package sim
