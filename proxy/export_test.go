package proxy

import "time"

// SetEOFDrain sets the bound on requests sent before a client's EOF for a
// test, which must call the function returned once its proxies are
// closed.
func SetEOFDrain(d time.Duration) (restore func()) {
	old := eofDrain
	eofDrain = d
	return func() { eofDrain = old }
}
