package authn

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"hash"
	"runtime"
	"sync"
	"time"
)

// MechanismPLAIN is SASL/PLAIN's name in SaslHandshake.
const MechanismPLAIN = "PLAIN"

var (
	errPlainTLS       = credRefuse("PLAIN is refused on a connection without TLS")
	errPlainMalformed = credRefuse("invalid SASL/PLAIN message: want authzid NUL user NUL password")
	errPlainEmpty     = credRefuse("SASL/PLAIN user name or password not specified")
	errPlainTooLong   = credRefuse("SASL/PLAIN message too long")
)

// Bounds of PLAIN. Kafka's PlainSaslServer reads what
// sasl.server.max.receive.size (512 KiB) lets through; the proxy refuses
// at once a message longer than an authorization id and a user name of
// MaxUserName and a password of plainMaxPassword, before splitting it.
const (
	plainMaxPassword = 1 << 10
	plainMaxMessage  = 2*MaxUserName + plainMaxPassword + 2
	// plainMaxVerifiers bounds the users whose last proven password is
	// remembered: users of the credential file who authenticated, each
	// about a hundred bytes with its name.
	plainMaxVerifiers = 4096
)

// PlainOptions configure NewPlain.
type PlainOptions struct {
	// AllowWithoutTLS accepts PLAIN on a connection without TLS, where
	// the password crosses the network in the clear. False (the zero
	// value): such an exchange is refused before its token is read.
	AllowWithoutTLS bool
}

// plainOrder is the order in which PLAIN looks for a user's credential: a
// password is checked against the first the user has.
var plainOrder = []string{MechanismSCRAMSHA256, MechanismSCRAMSHA512}

// plainVerifier is a keyed digest of the password a user last proved
// against a credential of the set the store held then.
type plainVerifier [sha256.Size]byte

// plainMechanism checks a password against a SCRAM credential, which takes
// a key derivation of the credential's iterations, milliseconds of CPU.
// To keep a failure cheap it remembers, per user, a verifier of the
// password last proven: HMAC-SHA-256 under a key drawn at start. A user
// has one password, so a password that differs from the verifier is
// refused without a derivation, and one that equals it is accepted
// without one. The verifiers are dropped whenever the store swaps in a new
// set of credentials (a reload), so a changed password is derived afresh.
// A user without a verifier costs one derivation; at most slots run at
// once proxy-wide, so failures for such users take at most that share of
// the CPU.
type plainMechanism struct {
	store *Store
	opts  PlainOptions
	key   []byte
	// derive is saltedPassword; tests count its calls.
	derive func(h func() hash.Hash, password, salt []byte, iterations int) ([]byte, error)
	slots  chan struct{}

	mu sync.Mutex
	// set is the credentials the verifiers were proven against.
	set       *Credentials
	verifiers map[string]plainVerifier
}

// NewPlain gives SASL/PLAIN (RFC 4616) checking passwords against the
// SCRAM credentials of store: the password, salted with the stored salt
// and iteration count, must give the stored key. It behaves as Kafka's
// PlainSaslServer: three fields, user and password not empty, an
// authorization id only if it equals the user name; a user the store does
// not hold is refused at once, as Kafka's own SCRAM server refuses one,
// with the refusal of a wrong password.
func NewPlain(store *Store, opts PlainOptions) Mechanism {
	key := make([]byte, 32)
	rand.Read(key)
	return &plainMechanism{
		store:     store,
		opts:      opts,
		key:       key,
		derive:    saltedPassword,
		slots:     make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)),
		verifiers: map[string]plainVerifier{},
	}
}

func (m *plainMechanism) Name() string { return MechanismPLAIN }

func (m *plainMechanism) Start(tls bool) Exchange {
	return &plainExchange{m: m, refused: !tls && !m.opts.AllowWithoutTLS}
}

// verifier is the keyed digest of user's password. The user is in it so
// that two users with one password have different verifiers; a user name
// holds no NUL.
func (m *plainMechanism) verifier(user string, password []byte) plainVerifier {
	mac := hmac.New(sha256.New, m.key)
	mac.Write([]byte(user))
	mac.Write([]byte{0})
	mac.Write(password)
	var v plainVerifier
	mac.Sum(v[:0])
	return v
}

// table gives the verifiers of set, nil if set is no longer the store's.
// Called with mu held. A set newer than the verifiers' drops them all.
func (m *plainMechanism) table(set *Credentials) map[string]plainVerifier {
	if m.set == set {
		return m.verifiers
	}
	if set != m.store.current() {
		return nil
	}
	m.set = set
	clear(m.verifiers)
	return m.verifiers
}

// lookup gives user's verifier proven against set.
func (m *plainMechanism) lookup(set *Credentials, user string) (plainVerifier, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.table(set)[user]
	return v, ok
}

// remember keeps v as user's verifier for set, unless the store has moved
// on from set. A full table drops one user first (which, map order
// being random, is any of them).
func (m *plainMechanism) remember(set *Credentials, user string, v plainVerifier) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.table(set)
	if t == nil {
		return
	}
	if _, ok := t[user]; !ok && len(t) >= plainMaxVerifiers {
		for u := range t {
			delete(t, u)
			break
		}
	}
	t[user] = v
}

// prove derives password's key with cred's salt and iterations and
// compares it with the stored key, waiting for a slot first.
func (m *plainMechanism) prove(mech string, cred Credential, password []byte) bool {
	m.slots <- struct{}{}
	defer func() { <-m.slots }()
	h := scramHash(mech)
	salted, err := m.derive(h, password, cred.Salt, cred.Iterations)
	return err == nil && subtle.ConstantTimeCompare(storedKey(h, salted), cred.StoredKey) == 1
}

type plainExchange struct {
	m       *plainMechanism
	refused bool
	over    bool
	user    string
	done    bool
	// claimed is the authcid the client sent, kept after a refusal for
	// its audit; never the password.
	claimed string
}

// Claimed implements Claimant: the authcid of the client's message.
func (x *plainExchange) Claimed() (Principal, bool) {
	if x.claimed == "" {
		return Principal{}, false
	}
	return Principal{Type: "User", Name: x.claimed}, true
}

func (x *plainExchange) Principal() Principal {
	if !x.done {
		return Principal{}
	}
	return Principal{Type: "User", Name: x.user}
}

func (x *plainExchange) Lifetime() time.Duration { return 0 }

func (x *plainExchange) Step(token []byte) ([]byte, bool, error) {
	if x.over {
		return nil, false, errExchangeOver
	}
	x.over = true
	if x.refused {
		return nil, false, errPlainTLS
	}
	if len(token) > plainMaxMessage {
		return nil, false, errPlainTooLong
	}
	fields := bytes.Split(token, []byte{0})
	if len(fields) != 3 {
		return nil, false, errPlainMalformed
	}
	authzid, user, password := string(fields[0]), string(fields[1]), fields[2]
	x.claimed = user
	if user == "" || len(password) == 0 {
		return nil, false, errPlainEmpty
	}
	if authzid != "" && authzid != user {
		return nil, false, errAuthzid
	}
	set := x.m.store.current()
	mech, cred, known := "", Credential{}, false
	for _, name := range plainOrder {
		if c, ok := set.Lookup(user, name); ok {
			mech, cred, known = name, c, true
			break
		}
	}
	// An unknown user is refused after the work of a wrong password
	// against a verifier, so that the two take the same microseconds.
	v := x.m.verifier(user, password)
	last, proven := x.m.lookup(set, user)
	if !known {
		subtle.ConstantTimeCompare(v[:], last[:])
		return nil, false, ErrAuthentication
	}
	if proven {
		if subtle.ConstantTimeCompare(v[:], last[:]) != 1 {
			return nil, false, ErrAuthentication
		}
	} else {
		if !x.m.prove(mech, cred, password) {
			return nil, false, ErrAuthentication
		}
		x.m.remember(set, user, v)
	}
	x.user = user
	x.done = true
	// Kafka's PlainSaslServer answers an empty token.
	return []byte{}, true, nil
}
