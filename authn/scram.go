package authn

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"hash"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// credRefusal is a refusal of a client's authentication with a message
// that is safe to send to the client and to log: it names the rule that
// refused, never a value the client sent or one the store holds.
type credRefusal struct{ msg string }

func (r *credRefusal) Error() string        { return "authentication failed: " + r.msg }
func (r *credRefusal) Is(target error) bool { return target == ErrAuthentication }

func credRefuse(msg string) error { return &credRefusal{msg: msg} }

// The refusals of the store's mechanisms. A wrong password and an unknown
// user are both ErrAuthentication itself, so that neither the client nor a
// log tells them apart.
var (
	errMalformed       = credRefuse("malformed SCRAM message")
	errAuthzid         = credRefuse("client requested an authorization id that is different from the user name")
	errTokenAuth       = credRefuse("delegation tokens are not supported")
	errChannelBinding  = credRefuse("channel binding is not supported")
	errMandatoryExt    = credRefuse("mandatory SCRAM extensions are not supported")
	errNonce           = credRefuse("invalid nonce in the SCRAM client-final-message")
	errBindingMismatch = credRefuse("channel binding data differ from the SCRAM gs2 header")
	errExchangeOver    = credRefuse("the SASL exchange is over")
	errFirstTooLong    = credRefuse("SCRAM client-first-message too long")
	errFinalTooLong    = credRefuse("SCRAM client-final-message too long")
)

// Bounds of the client's SCRAM messages. RFC 5802's and Kafka's clients
// send a few hundred bytes: a user name, a nonce of a few dozen
// characters, perhaps tokenauth. Kafka itself bounds them only by
// sasl.server.max.receive.size (512 KiB); the proxy refuses a longer one
// at once, as malformed, so that what an exchange keeps between its two
// rounds is a few KiB whatever the client sends. The final message repeats
// the nonce and adds the proof (88 characters for SHA-512).
const (
	scramMaxClientFirst = 2 << 10
	scramMaxClientFinal = 4 << 10
)

// scramNonceSize is the random part the server adds to the client's nonce.
const scramNonceSize = 24

// scramMechanism is SCRAM-SHA-256 or SCRAM-SHA-512 (RFC 5802, RFC 7677)
// over the store's credentials.
type scramMechanism struct {
	name  string
	h     func() hash.Hash
	store *Store
	// fakeKey keys the salt and keys of a user the store does not hold,
	// so that each unknown user gets the same made-up credential on every
	// attempt (a salt that changes would give the user away).
	fakeKey []byte
	// nonce gives the server's part of the nonce; tests fix it to check
	// RFC 7677's exchange.
	nonce func() string
}

// NewSCRAM gives the SCRAM mechanism named mechanism (MechanismSCRAMSHA256
// or MechanismSCRAMSHA512) checking clients against store.
//
// It behaves as Kafka's ScramSaslServer: gs2 flag "n" (and "y", which RFC
// 5802 allows a server without channel binding to accept), never "p"; an
// authorization id only if it equals the user name; extensions ignored
// except tokenauth=true, a delegation token, which the proxy cannot check
// and refuses. Unlike Kafka it answers an unknown user with a made-up salt
// and fails it at the proof, as RFC 5802 section 9 suggests, so that the
// first round does not tell which users exist.
func NewSCRAM(mechanism string, store *Store) (Mechanism, error) {
	h := scramHash(mechanism)
	if h == nil {
		return nil, errors.New("authn: " + strconv.Quote(mechanism) + " is not a SCRAM mechanism")
	}
	key := make([]byte, 32)
	rand.Read(key)
	return &scramMechanism{name: mechanism, h: h, store: store, fakeKey: key, nonce: scramNonce}, nil
}

func scramNonce() string {
	b := make([]byte, scramNonceSize)
	rand.Read(b)
	return base64.RawStdEncoding.EncodeToString(b)
}

func (m *scramMechanism) Name() string { return m.name }

// Start begins an exchange. SCRAM sends no secret, so TLS does not matter.
func (m *scramMechanism) Start(bool) Exchange { return &scramExchange{m: m} }

// fake is the credential of a user the store does not hold: a salt and
// keys derived from the user name, the default iteration count.
func (m *scramMechanism) fake(user string) Credential {
	salt := scramHMAC(m.h, m.fakeKey, []byte("salt\x00"+user))
	return Credential{
		Salt:       salt[:min(len(salt), saltSize)],
		Iterations: DefaultIterations,
		StoredKey:  scramHMAC(m.h, m.fakeKey, []byte("stored\x00"+user)),
		ServerKey:  scramHMAC(m.h, m.fakeKey, []byte("server\x00"+user)),
	}
}

type scramState int

const (
	scramFirst scramState = iota
	scramFinal
	scramDone
	scramFailed
)

type scramExchange struct {
	m     *scramMechanism
	state scramState
	user  string
	// known is false when cred is made up: no proof then succeeds.
	known bool
	cred  Credential
	// gs2 is the client's gs2 header, which the final message's channel
	// binding must repeat.
	gs2 string
	// authPrefix is the start of the AuthMessage, client-first-message-bare
	// "," server-first-message ",", copied out of the client's message so
	// that no larger buffer stays alive until the final round; nonce is
	// the combined nonce, a part of it.
	authPrefix string
	nonce      string
	// claimed is the user name the client-first-message gave, unescaped,
	// kept after a refusal for its audit.
	claimed string
}

// Claimed implements Claimant: the user name of the client-first-message,
// as the server read it.
func (x *scramExchange) Claimed() (Principal, bool) {
	if x.claimed == "" {
		return Principal{}, false
	}
	return Principal{Type: "User", Name: x.claimed}, true
}

func (x *scramExchange) Principal() Principal {
	if x.state != scramDone {
		return Principal{}
	}
	return Principal{Type: "User", Name: x.user}
}

func (x *scramExchange) Lifetime() time.Duration { return 0 }

func (x *scramExchange) Step(token []byte) ([]byte, bool, error) {
	switch x.state {
	case scramFirst:
		// The bounds are checked before the message is copied.
		if len(token) > scramMaxClientFirst {
			x.fail()
			return nil, false, errFirstTooLong
		}
		reply, err := x.first(string(token))
		if err != nil {
			x.fail()
			return nil, false, err
		}
		x.state = scramFinal
		return reply, false, nil
	case scramFinal:
		if len(token) > scramMaxClientFinal {
			x.fail()
			return []byte("e=invalid-encoding"), false, errFinalTooLong
		}
		reply, err := x.final(string(token))
		if err != nil {
			x.fail()
			return reply, false, err
		}
		x.state = scramDone
		x.forget()
		return reply, true, nil
	}
	return nil, false, errExchangeOver
}

func (x *scramExchange) fail() {
	x.state = scramFailed
	x.forget()
}

// forget drops the credential once the exchange has no more use for it.
func (x *scramExchange) forget() {
	x.cred = Credential{}
	x.known = false
	x.authPrefix, x.nonce = "", ""
}

// first reads the client-first-message (RFC 5802 section 7):
//
//	gs2-cbind-flag "," [ "a=" saslname ] "," [ "m=" ext "," ] "n=" saslname "," "r=" nonce [ "," ext ]*
//
// and answers the server-first-message "r=" nonce "," "s=" salt "," "i=" iterations.
func (x *scramExchange) first(msg string) ([]byte, error) {
	flag, rest, ok := strings.Cut(msg, ",")
	switch {
	case !ok:
		return nil, errMalformed
	case flag == "n", flag == "y":
	case strings.HasPrefix(flag, "p="):
		return nil, errChannelBinding
	default:
		return nil, errMalformed
	}
	authzField, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, errMalformed
	}
	var authzid string
	if authzField != "" {
		raw, ok := strings.CutPrefix(authzField, "a=")
		if !ok {
			return nil, errMalformed
		}
		if authzid, ok = saslName(raw); !ok {
			return nil, errMalformed
		}
	}
	if strings.HasPrefix(bare, "m=") {
		return nil, errMandatoryExt
	}
	fields := strings.Split(bare, ",")
	if len(fields) < 2 {
		return nil, errMalformed
	}
	rawUser, ok := strings.CutPrefix(fields[0], "n=")
	if !ok {
		return nil, errMalformed
	}
	user, ok := saslName(rawUser)
	if !ok {
		return nil, errMalformed
	}
	x.claimed = strings.Clone(user)
	clientNonce, ok := strings.CutPrefix(fields[1], "r=")
	if !ok || !printableNonce(clientNonce) {
		return nil, errMalformed
	}
	for _, ext := range fields[2:] {
		k, v, ok := strings.Cut(ext, "=")
		if !ok || !scramAlpha(k) {
			return nil, errMalformed
		}
		// KIP-48: the user name is a delegation token's id and the
		// password its HMAC, which only the cluster can check.
		if k == "tokenauth" && strings.EqualFold(v, "true") {
			return nil, errTokenAuth
		}
	}
	if authzid != "" && authzid != user {
		return nil, errAuthzid
	}

	x.cred, x.known = x.m.store.Lookup(user, x.m.name)
	if !x.known {
		x.cred = x.m.fake(user)
	}
	x.gs2 = flag + "," + authzField + ","
	serverNonce := x.m.nonce()
	serverFirst := "r=" + clientNonce + serverNonce +
		",s=" + base64.StdEncoding.EncodeToString(x.cred.Salt) +
		",i=" + strconv.Itoa(x.cred.Iterations)
	// One new string holds all that the final round needs; the user name
	// is copied alone.
	x.authPrefix = bare + "," + serverFirst + ","
	start := len(bare) + len(",r=")
	x.nonce = x.authPrefix[start : start+len(clientNonce)+len(serverNonce)]
	x.user = strings.Clone(user)
	return []byte(serverFirst), nil
}

// final reads the client-final-message:
//
//	"c=" base64(gs2 header) "," "r=" nonce [ "," ext ]* "," "p=" base64(proof)
//
// and answers "v=" base64(ServerSignature), or a server-error ("e=...")
// with the refusal.
func (x *scramExchange) final(msg string) ([]byte, error) {
	withoutProof, rawProof, ok := scramCutLast(msg, ",p=")
	if !ok {
		return []byte("e=invalid-encoding"), errMalformed
	}
	fields := strings.Split(withoutProof, ",")
	if len(fields) < 2 {
		return []byte("e=invalid-encoding"), errMalformed
	}
	rawBinding, ok := strings.CutPrefix(fields[0], "c=")
	if !ok {
		return []byte("e=invalid-encoding"), errMalformed
	}
	binding, err := base64.StdEncoding.Strict().DecodeString(rawBinding)
	if err != nil {
		return []byte("e=invalid-encoding"), errMalformed
	}
	nonce, ok := strings.CutPrefix(fields[1], "r=")
	if !ok {
		return []byte("e=invalid-encoding"), errMalformed
	}
	for _, ext := range fields[2:] {
		if k, _, ok := strings.Cut(ext, "="); !ok || !scramAlpha(k) {
			return []byte("e=invalid-encoding"), errMalformed
		}
	}
	proof, err := base64.StdEncoding.Strict().DecodeString(rawProof)
	if err != nil {
		return []byte("e=invalid-encoding"), errMalformed
	}
	// Without channel binding, c= carries the gs2 header alone.
	if string(binding) != x.gs2 {
		return []byte("e=channel-bindings-dont-match"), errBindingMismatch
	}
	// The nonce is public (the server sent it); what matters is that a
	// proof computed for another exchange does not pass here.
	if nonce != x.nonce {
		return []byte("e=other-error"), errNonce
	}

	authMessage := []byte(x.authPrefix + withoutProof)
	// ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage); the proof
	// holds when H(ClientKey) is the stored key.
	clientKey := scramHMAC(x.m.h, x.cred.StoredKey, authMessage)
	valid := len(proof) == len(clientKey)
	if valid {
		subtle.XORBytes(clientKey, clientKey, proof)
	}
	d := x.m.h()
	d.Write(clientKey)
	match := subtle.ConstantTimeCompare(d.Sum(nil), x.cred.StoredKey) == 1
	if !valid || !match || !x.known {
		return []byte("e=invalid-proof"), ErrAuthentication
	}
	sig := hmac.New(x.m.h, x.cred.ServerKey)
	sig.Write(authMessage)
	return []byte("v=" + base64.StdEncoding.EncodeToString(sig.Sum(nil))), nil
}

// saslName decodes a SCRAM user name: "=2C" is a comma, "=3D" an equals
// sign, and no other "=" may appear (RFC 5802 section 5.1).
func saslName(s string) (string, bool) {
	if s == "" || !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return "", false
	}
	if !strings.Contains(s, "=") {
		return s, true
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '=')
		if i < 0 {
			b.WriteString(s)
			return b.String(), true
		}
		b.WriteString(s[:i])
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", false
		}
		s = s[i+3:]
	}
}

// printableNonce holds a nonce to RFC 5802's printable: ASCII 0x21 to 0x7E
// but the comma.
func printableNonce(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

func scramAlpha(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// scramCutLast cuts s around the last sep.
func scramCutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}
