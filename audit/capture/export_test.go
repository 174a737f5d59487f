package capture

// Work is how many entries placing ar's answer's partitions and grouping
// them looked at.
func (ar *Req) Work() int { return ar.work }

// MaxEventParts is maxEventParts, for the tests of the bound.
const MaxEventParts = maxEventParts
