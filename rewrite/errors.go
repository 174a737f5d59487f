package rewrite

import "errors"

var (
	// ErrMap wraps an error returned by the Mapper. The Mapper's own error
	// is wrapped too, so errors.Is works for both.
	ErrMap = errors.New("rewrite: mapping a broker address")

	// ErrPortRange means the Mapper returned a port that does not fit the
	// response field: KRaft endpoint ports (DescribeQuorum listeners, Vote,
	// BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot) are uint16 on the
	// wire, and truncating would hand clients a wrong port.
	ErrPortRange = errors.New("rewrite: mapped port out of range")
)
