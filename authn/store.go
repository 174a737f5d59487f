package authn

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// The mechanisms whose credentials the store keeps, named as SaslHandshake
// names them. PLAIN has no credential of its own: it is checked against
// one of these.
const (
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
)

// Iteration bounds of a SCRAM credential. Kafka's ScramMechanism holds
// both SHA-256 and SHA-512 to 4096..16384 and creates credentials with
// 4096 unless told otherwise; keeping to its range means a credential
// moves between the two either way. The upper bound also bounds what one
// PLAIN attempt costs the proxy, which derives the key itself.
const (
	MinIterations     = 4096
	MaxIterations     = 16384
	DefaultIterations = 4096
)

// saltSize is the length of a salt NewCredential draws; RFC 5802 leaves it
// open, and Kafka's are about 25 bytes.
const saltSize = 32

// Credential is one user's salted SCRAM credential for one mechanism, the
// four values Kafka keeps (ScramCredential): never the password, only what
// verifies a proof of it. StoredKey and ServerKey are still secrets: with
// them and a recorded exchange a client or a server can be impersonated.
type Credential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// scramHash is the hash of a SCRAM mechanism, nil for a name that is not one.
func scramHash(mechanism string) func() hash.Hash {
	switch mechanism {
	case MechanismSCRAMSHA256:
		return sha256.New
	case MechanismSCRAMSHA512:
		return sha512.New
	}
	return nil
}

// SCRAMMechanisms lists the mechanisms a credential can be made for.
func SCRAMMechanisms() []string { return []string{MechanismSCRAMSHA256, MechanismSCRAMSHA512} }

// NewCredential derives the credential of password for mechanism with a
// fresh random salt, as `kafka-configs --add-config
// 'SCRAM-SHA-256=[iterations=4096,password=...]'` does.
func NewCredential(mechanism string, password []byte, iterations int) (Credential, error) {
	salt := make([]byte, saltSize)
	rand.Read(salt)
	return DeriveCredential(mechanism, password, salt, iterations)
}

// DeriveCredential derives the credential of password for mechanism with
// the given salt (RFC 5802 section 3): SaltedPassword = Hi(password, salt,
// i), StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey =
// HMAC(SaltedPassword, "Server Key"). The password is taken as its bytes,
// without SASLprep, as Kafka's ScramFormatter and its clients do: a
// password that SASLprep would change must derive what Kafka derives.
func DeriveCredential(mechanism string, password, salt []byte, iterations int) (Credential, error) {
	h := scramHash(mechanism)
	switch {
	case h == nil:
		return Credential{}, fmt.Errorf("mechanism %q: want %s or %s", mechanism, MechanismSCRAMSHA256, MechanismSCRAMSHA512)
	case iterations < MinIterations || iterations > MaxIterations:
		return Credential{}, fmt.Errorf("iterations %d: want %d to %d", iterations, MinIterations, MaxIterations)
	case len(salt) == 0:
		return Credential{}, errors.New("empty salt")
	}
	salted, err := saltedPassword(h, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return Credential{
		Salt:       bytes.Clone(salt),
		Iterations: iterations,
		StoredKey:  storedKey(h, salted),
		ServerKey:  scramHMAC(h, salted, []byte("Server Key")),
	}, nil
}

// saltedPassword is Hi(password, salt, i), which is PBKDF2 with HMAC. It
// fails only in FIPS 140-only mode, for a salt or key FIPS finds short.
func saltedPassword(h func() hash.Hash, password, salt []byte, iterations int) ([]byte, error) {
	return pbkdf2.Key(h, string(password), salt, iterations, h().Size())
}

func storedKey(h func() hash.Hash, salted []byte) []byte {
	d := h()
	d.Write(scramHMAC(h, salted, []byte("Client Key")))
	return d.Sum(nil)
}

func scramHMAC(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// Credentials are the users of a credential file and their credentials,
// by user and mechanism. The zero value holds no user.
type Credentials struct {
	users map[string]map[string]Credential
}

// Set adds or replaces user's credential for mechanism.
func (c *Credentials) Set(user, mechanism string, cred Credential) error {
	if err := ValidUserName(user); err != nil {
		return err
	}
	if err := checkCredential(mechanism, cred); err != nil {
		return err
	}
	if c.users == nil {
		c.users = map[string]map[string]Credential{}
	}
	if c.users[user] == nil {
		c.users[user] = map[string]Credential{}
	}
	c.users[user][mechanism] = cred
	return nil
}

// Lookup gives user's credential for mechanism.
func (c *Credentials) Lookup(user, mechanism string) (Credential, bool) {
	if c == nil {
		return Credential{}, false
	}
	cred, ok := c.users[user][mechanism]
	return cred, ok
}

// Users lists the users, sorted.
func (c *Credentials) Users() []string {
	if c == nil {
		return nil
	}
	users := make([]string, 0, len(c.users))
	for u := range c.users {
		users = append(users, u)
	}
	slices.Sort(users)
	return users
}

// Mechanisms lists the mechanisms user has a credential for, sorted.
func (c *Credentials) Mechanisms(user string) []string {
	if c == nil {
		return nil
	}
	var ms []string
	for m := range c.users[user] {
		ms = append(ms, m)
	}
	slices.Sort(ms)
	return ms
}

// MaxUserName bounds a user name, in bytes: what the SCRAM and PLAIN
// messages that carry one may hold.
const MaxUserName = 1 << 10

// ValidUserName refuses a user name no client could send: empty, longer
// than MaxUserName, not UTF-8, or holding a control character (PLAIN
// separates its fields with NUL).
func ValidUserName(user string) error {
	switch {
	case user == "":
		return errors.New("empty user name")
	case len(user) > MaxUserName:
		return fmt.Errorf("user name of %d bytes: at most %d", len(user), MaxUserName)
	case !utf8.ValidString(user):
		return errors.New("user name is not UTF-8")
	case strings.ContainsFunc(user, unicode.IsControl):
		return errors.New("user name holds a control character")
	}
	return nil
}

// checkCredential refuses a credential the mechanisms could not use. Its
// messages never hold a value: the keys are secrets.
func checkCredential(mechanism string, c Credential) error {
	h := scramHash(mechanism)
	switch {
	case h == nil:
		return fmt.Errorf("mechanism %q: want %s or %s", mechanism, MechanismSCRAMSHA256, MechanismSCRAMSHA512)
	case len(c.Salt) == 0:
		return errors.New("salt: empty")
	case c.Iterations < MinIterations || c.Iterations > MaxIterations:
		return fmt.Errorf("iterations %d: want %d to %d", c.Iterations, MinIterations, MaxIterations)
	case len(c.StoredKey) != h().Size():
		return fmt.Errorf("stored_key: %d bytes, want %d for %s", len(c.StoredKey), h().Size(), mechanism)
	case len(c.ServerKey) != h().Size():
		return fmt.Errorf("server_key: %d bytes, want %d for %s", len(c.ServerKey), h().Size(), mechanism)
	}
	return nil
}

// fileCredential is a credential as the file writes it: the fields and
// names of Kafka's own form (`salt=...,stored_key=...,server_key=...,
// iterations=4096`), base64 as Kafka encodes them.
type fileCredential struct {
	Salt       string `yaml:"salt"`
	Iterations int    `yaml:"iterations"`
	StoredKey  string `yaml:"stored_key"`
	ServerKey  string `yaml:"server_key"`
}

type fileContent struct {
	Users map[string]map[string]fileCredential `yaml:"users"`
}

const fileHeader = `# inorder client credentials: salted SCRAM credentials (RFC 5802), as Kafka
# keeps them. No password is stored, but the keys verify and forge proofs:
# keep this file private. Written by "inorder credentials add".
`

// ParseCredentials reads the content of a credential file. Its errors name the user,
// mechanism and field at fault, never a value.
func ParseCredentials(data []byte) (*Credentials, error) {
	var fc fileContent
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	// An empty document (no user yet, or only comments) is io.EOF.
	if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlError(err)
	}
	c := &Credentials{}
	for user, mechs := range fc.Users {
		if len(mechs) == 0 {
			return nil, fmt.Errorf("user %q: no credential", user)
		}
		for mech, f := range mechs {
			cred, err := f.decode()
			if err == nil {
				err = c.Set(user, mech, cred)
			}
			if err != nil {
				return nil, fmt.Errorf("user %q, %s: %w", user, mech, err)
			}
		}
	}
	return c, nil
}

// yamlError keeps the line yaml.v3 reports and drops the text it quotes:
// a misplaced line of the file may be a key.
func yamlError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return fmt.Errorf("malformed credential file: %d problems, first: %s", len(te.Errors), redactYAML(te.Errors[0]))
	}
	return fmt.Errorf("malformed credential file: %s", redactYAML(err.Error()))
}

// redactYAML cuts a yaml.v3 message at its first quoted value.
func redactYAML(msg string) string {
	if i := strings.IndexAny(msg, "`\""); i >= 0 {
		return msg[:i] + "(value not shown)"
	}
	return msg
}

func (f fileCredential) decode() (Credential, error) {
	var c Credential
	var err error
	if c.Salt, err = base64.StdEncoding.DecodeString(f.Salt); err != nil {
		return c, errors.New("salt: not base64")
	}
	if c.StoredKey, err = base64.StdEncoding.DecodeString(f.StoredKey); err != nil {
		return c, errors.New("stored_key: not base64")
	}
	if c.ServerKey, err = base64.StdEncoding.DecodeString(f.ServerKey); err != nil {
		return c, errors.New("server_key: not base64")
	}
	c.Iterations = f.Iterations
	return c, nil
}

// Marshal gives the file content of c: YAML, users and mechanisms sorted,
// so that adding one user changes only its lines.
func (c *Credentials) Marshal() ([]byte, error) {
	fc := fileContent{Users: map[string]map[string]fileCredential{}}
	for user, mechs := range c.users {
		fc.Users[user] = map[string]fileCredential{}
		for mech, cred := range mechs {
			fc.Users[user][mech] = fileCredential{
				Salt:       base64.StdEncoding.EncodeToString(cred.Salt),
				Iterations: cred.Iterations,
				StoredKey:  base64.StdEncoding.EncodeToString(cred.StoredKey),
				ServerKey:  base64.StdEncoding.EncodeToString(cred.ServerKey),
			}
		}
	}
	body, err := yaml.Marshal(fc)
	if err != nil {
		return nil, err
	}
	return append([]byte(fileHeader), body...), nil
}

// WriteFile writes c to path atomically with mode 0600: a temporary file
// in the same directory, synced, renamed over path. A proxy reading path
// at any moment sees the old content or the new one, never a part.
func (c *Credentials) WriteFile(path string) (err error) {
	data, err := c.Marshal()
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// CreateTemp makes the file 0600 already; say it, since the mode is
	// the point.
	if err = tmp.Chmod(0o600); err != nil {
		return err
	}
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// The rename is durable once the directory is; a directory that
	// cannot be synced (some file systems) still has the file.
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Store holds the credentials the mechanisms check against. Load swaps a
// whole new set in; exchanges in progress keep the set they looked up in.
// The zero value holds no user: every authentication fails.
type Store struct {
	creds atomic.Pointer[Credentials]
}

// NewStore gives a store holding c.
func NewStore(c *Credentials) *Store {
	s := &Store{}
	s.Swap(c)
	return s
}

// Load reads the credential file at path and swaps it in. On an error the
// store keeps what it held.
func (s *Store) Load(path string) error {
	c, err := ReadCredentials(path)
	if err != nil {
		return err
	}
	s.Swap(c)
	return nil
}

// ReadCredentials reads a credential file. One that does not exist is an error
// (fs.ErrNotExist): a proxy told to check clients against a file that is
// not there is misconfigured, not one without users.
func ReadCredentials(path string) (*Credentials, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := ParseCredentials(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Swap replaces the credentials the store holds. c must not change
// afterwards: lookups read it without a lock.
func (s *Store) Swap(c *Credentials) { s.creds.Store(c) }

// Lookup gives user's credential for mechanism. The credential shares
// the store's memory: read it, never change it.
func (s *Store) Lookup(user, mechanism string) (Credential, bool) {
	if s == nil {
		return Credential{}, false
	}
	return s.creds.Load().Lookup(user, mechanism)
}

// current is the set of credentials the store holds now, which changes
// as a whole on every Swap.
func (s *Store) current() *Credentials {
	if s == nil {
		return nil
	}
	return s.creds.Load()
}
