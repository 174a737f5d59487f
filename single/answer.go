package single

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/inorder-proxy/inorder/wire"
)

// DecodeAnswer decodes a part's answer frame at the part's version. A
// broker that does not know the ApiVersions version asked answers with a
// v0 body and UNSUPPORTED_VERSION; that body is read at v0 and given the
// version asked, which merge reads.
func DecodeAnswer(key, version int16, frame []byte) (kmsg.Response, error) {
	off, err := wire.ResponseBody(frame, wire.RequestHeader{Key: key, Version: version}.ResponseFlexible())
	if err != nil {
		return nil, err
	}
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	if key == wire.ApiVersionsKey && len(frame) >= off+2 && int16(frame[off])<<8|int16(frame[off+1]) == kerr.UnsupportedVersion.Code {
		resp.SetVersion(0)
	}
	if err := resp.ReadFrom(frame[off:]); err != nil {
		return nil, fmt.Errorf("%s v%d answer: %v", kmsg.NameForKey(key), version, err)
	}
	resp.SetVersion(version)
	return resp, nil
}
