// Package traces exports and reads OpenTelemetry spans of steps and compares
// measured spans with predicted ops by op ID.
package traces
