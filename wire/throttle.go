package wire

import "github.com/twmb/franz-go/pkg/kbin"

// ProduceThrottleOffset returns the offset in a Produce response body of
// its throttle_time_ms, which follows the topics from version 1 on: a
// walk over the partitions, which carry no records, finds it without
// decoding the body. Version 0 has no such field (ErrCannotScan), nor has
// a body the walk cannot read.
func ProduceThrottleOffset(version int16, body []byte) (int, error) {
	if version < 1 {
		return 0, ErrCannotScan
	}
	r := kbin.Reader{Src: body}
	flexible := Flexible(produceKey, version)
	scanTopics(&r, version, flexible, produceResponsePartitions)
	off := len(body) - len(r.Src)
	r.Int32()
	if _, err := responseTags(&r, body, flexible); err != nil {
		return 0, err
	}
	return off, nil
}
