package proxy

import (
	"time"

	"github.com/inorder-proxy/inorder/internal/ratelog"
)

// rateLog is ratelog.Log under the name the proxy's files use; the single
// topology's view, in a package of its own, holds one too.
type rateLog struct{ l ratelog.Log }

// allow reports whether a line of this kind may be logged now, and how many
// were held back since the last one.
func (r *rateLog) allow(kind string, now time.Time) (skipped int, ok bool) {
	return r.l.Allow(kind, now)
}
