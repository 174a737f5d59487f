package authn

import (
	"bytes"
	"crypto/subtle"
	"time"
)

// MechanismPLAIN is SASL/PLAIN's name in SaslHandshake.
const MechanismPLAIN = "PLAIN"

var (
	errPlainTLS       = credRefuse("PLAIN is refused on a connection without TLS")
	errPlainMalformed = credRefuse("invalid SASL/PLAIN message: want authzid NUL user NUL password")
	errPlainEmpty     = credRefuse("SASL/PLAIN user name or password not specified")
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

type plainMechanism struct {
	store *Store
	opts  PlainOptions
	// dummy is checked when the user has no credential, so that an
	// unknown user costs one key derivation, as a known one does.
	dummy Credential
}

// NewPlain gives SASL/PLAIN (RFC 4616) checking passwords against the
// SCRAM credentials of store: the password, salted with the stored salt
// and iteration count, must give the stored key. It behaves as Kafka's
// PlainSaslServer: three fields, user and password not empty, an
// authorization id only if it equals the user name.
func NewPlain(store *Store, opts PlainOptions) Mechanism {
	dummy, err := NewCredential(MechanismSCRAMSHA256, []byte("no password matches this credential"), DefaultIterations)
	if err != nil {
		panic("authn: the dummy credential: " + err.Error())
	}
	return &plainMechanism{store: store, opts: opts, dummy: dummy}
}

func (m *plainMechanism) Name() string { return MechanismPLAIN }

func (m *plainMechanism) Start(tls bool) Exchange {
	return &plainExchange{m: m, refused: !tls && !m.opts.AllowWithoutTLS}
}

type plainExchange struct {
	m       *plainMechanism
	refused bool
	over    bool
	user    string
	done    bool
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
	fields := bytes.Split(token, []byte{0})
	if len(fields) != 3 {
		return nil, false, errPlainMalformed
	}
	authzid, user, password := string(fields[0]), string(fields[1]), fields[2]
	if user == "" || len(password) == 0 {
		return nil, false, errPlainEmpty
	}
	if authzid != "" && authzid != user {
		return nil, false, errAuthzid
	}
	mech, cred, known := MechanismSCRAMSHA256, x.m.dummy, false
	for _, name := range plainOrder {
		if c, ok := x.m.store.Lookup(user, name); ok {
			mech, cred, known = name, c, true
			break
		}
	}
	h := scramHash(mech)
	salted, err := saltedPassword(h, password, cred.Salt, cred.Iterations)
	if err != nil || subtle.ConstantTimeCompare(storedKey(h, salted), cred.StoredKey) != 1 || !known {
		return nil, false, ErrAuthentication
	}
	x.user = user
	x.done = true
	// Kafka's PlainSaslServer answers an empty token.
	return []byte{}, true, nil
}
