package authn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"
)

// The rules of Kafka's documentation and tests (SslPrincipalMapperTest),
// with the names Kafka gives.
func TestPrincipalMapperKafkaExamples(t *testing.T) {
	m, err := ParsePrincipalMappingRules(strings.Join([]string{
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L`,
		`RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L`,
		`RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U`,
		`RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U`,
		`DEFAULT`,
	}, ", "))
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=Duke,OU=ServiceUsers,O=Org,C=US":        "duke",
		"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US": "duke@sme",
		"cn=duke,ou=sme,dc=mycp,dc=com":             "DUKE@SME",
		"cN=duke,OU=JavaSoft,O=Sun Microsystems":    "DUKE",
		"OU=JavaSoft,O=Sun Microsystems,C=US":       "OU=JavaSoft,O=Sun Microsystems,C=US",
	} {
		if got, err := m.Name(dn); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", dn, got, err, want)
		}
	}

	// The documentation's example of ssl.principal.mapping.rules.
	m, err = ParsePrincipalMappingRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown": "serviceuser",
		"CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown":          "adminuser@admin",
		"CN=kafka-client,OU=Eng,O=Acme,C=US":                                      "kafka",
		"O=Acme,C=US":                                                             "O=Acme,C=US",
	} {
		if got, err := m.Name(dn); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", dn, got, err, want)
		}
	}

	// An escaped comma in the subject, matched by the pattern.
	m, err = ParsePrincipalMappingRules(`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := m.Name(`CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`); err != nil || got != `Tkac\, Adam` {
		t.Errorf("%q %v", got, err)
	}
}

func TestPrincipalMapperValidity(t *testing.T) {
	for _, rules := range []string{
		"DEFAULT",
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/`,
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT`,
		`RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/`,
		`RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L`,
		`RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U`,
		`RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/`,
		`RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/`,
		`RULE:^CN=(?<user>[^,]+),.*$/${user}/`,
	} {
		if _, err := ParsePrincipalMappingRules(rules); err != nil {
			t.Errorf("%s: %v", rules, err)
		}
	}
	for _, rules := range []string{
		"default",
		"DEFAUL",
		"DEFAULT/L",
		"DEFAULT/U",
		`RULE:CN=(.*?),OU=ServiceUsers.*/$1`,
		`rule:^CN=(.*?),OU=ServiceUsers.*$/$1/`,
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U`,
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/L`,
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/U`,
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/LU`,
		// No rule at all would refuse every client.
		"",
		" , ,",
		// Patterns that do not compile, in Java or in RE2.
		`RULE:^CN=(.*$/$1/`,
		`RULE:^CN=(.*)\1$/$1/`,
		`RULE:^(?=CN).*$/x/`,
		`RULE:^CN=(.*+)$/$1/`,
		// Java constructs RE2 would read differently.
		`RULE:^CN=\12$/x/`,
		`RULE:^CN=[a-z&&[^aeiou]]+$/x/`,
		`RULE:^CN=[[:alpha:]]+$/x/`,
		`RULE:^(?U)CN=.*$/x/`,
		`RULE:^CN=(?P<n>.*)$/x/`,
		`RULE:^CN=\v$/x/`,
		// Replacements Java would throw on when the rule matched.
		`RULE:^CN=.*$/$1/`,
		`RULE:^CN=(.*)$/$/`,
		`RULE:^CN=(.*)$/$x/`,
		`RULE:^CN=(.*)$/${nope}/`,
		`RULE:^CN=(.*)$/${}/`,
		`RULE:^CN=(.*)$/${1a}/`,
		`RULE:^CN=(.*)$/${user/`,
		`RULE:^CN=(.*)$/x\/`,
		`RULE:^CN=(.*)$/$99999999999/`,
	} {
		if m, err := ParsePrincipalMappingRules(rules); err == nil {
			t.Errorf("%q parsed as %v", rules, m)
		}
	}
}

// How a rules string is cut into rules, as Kafka's own test shows it.
func TestPrincipalMapperSplitting(t *testing.T) {
	for rules, want := range map[string]string{
		"DEFAULT":                        "[DEFAULT]",
		"RULE://":                        "[RULE:/]",
		"RULE:/.*/":                      "[RULE:/.*]",
		"RULE:/.*/L":                     "[RULE:/.*/L]",
		"RULE://,DEFAULT":                "[RULE:/, DEFAULT]",
		"  RULE:// ,  DEFAULT  ":         "[RULE:/, DEFAULT]",
		"  RULE:   /     / ,  DEFAULT  ": "[RULE:   /     , DEFAULT]",
		"  RULE:  /     /U   ,DEFAULT  ": "[RULE:  /     /U, DEFAULT]",
		"  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ": "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
		",,RULE://,,,DEFAULT,,":                                  "[RULE:/, DEFAULT]",
		",  , RULE: /   /    ,,,   DEFAULT, ,   ":                "[RULE: /   , DEFAULT]",
		"     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,":             "[RULE:   /  /U, DEFAULT]",
		`RULE:\/\\\(\)\n\t/\/\//`:                                `[RULE:\/\\\(\)\n\t/\/\/]`,
		`RULE:\**\/+/*/L,RULE:\/*\**/**/`:                        `[RULE:\**\/+/*/L, RULE:\/*\**/**]`,
		`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`: `[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]`,
	} {
		m, err := ParsePrincipalMappingRules(rules)
		if err != nil {
			t.Errorf("%q: %v", rules, err)
			continue
		}
		if m.String() != want {
			t.Errorf("%q: %s, want %s", rules, m, want)
		}
	}
}

// Java's String.replaceAll, which Kafka applies once the pattern matched
// the whole subject, replaces every match, empty ones after a match
// included.
func TestPrincipalMapperReplaceAll(t *testing.T) {
	for _, tc := range []struct{ rules, dn, want string }{
		// Unanchored lazy groups: the first match is not the whole
		// subject, and the rest is kept.
		{`RULE:CN=(.*?),(.*?)/$1/`, "CN=a,b", "ab"},
		// Java's .* matches the subject, then the empty string at its end.
		{`RULE:.*/x/`, "CN=a", "xx"},
		{`RULE:(.*)/[$1]/`, "CN=a", "[CN=a][]"},
		{`RULE:^(.*)$/[$1]/`, "CN=a", "[CN=a]"},
		// $n beyond the groups: Kafka makes it a literal; a two-digit
		// reference falls back to one digit and a literal.
		{`RULE:^CN=(.*)$/$1@$2/`, "CN=a", "a@$2"},
		{`RULE:^CN=(.*)$/$12/`, "CN=a", "a2"},
		// $0 is the whole match.
		{`RULE:^CN=(.)$/$0!/`, "CN=a", "CN=a!"},
		{`RULE:^CN=(?<u>.*)$/${u}-$1/`, "CN=bob", "bob-bob"},
		{`RULE:^CN=(.*)$/\$1 \\ \//`, "CN=a", `$1 \ /`},
		// Unmatched optional group: nothing.
		{`RULE:^CN=(x)?(.*)$/[$1]$2/`, "CN=a", "[]a"},
		// Case flags as Java's, not Go's, where they differ.
		{`RULE:^CN=(.*)$/$1/U`, "CN=straße", "STRASSE"},
		{`RULE:^CN=(.*)$/$1/L`, "CN=İSTANBUL", "i\u0307stanbul"},
		{`RULE:^CN=(.*)$/$1/L`, "CN=ΟΔΟΣ", "οδος"[:len("οδο")] + "ς"},
	} {
		m, err := ParsePrincipalMappingRules(tc.rules)
		if err != nil {
			t.Errorf("%s: %v", tc.rules, err)
			continue
		}
		if got, err := m.Name(tc.dn); err != nil || got != tc.want {
			t.Errorf("%s on %q: %q %v, want %q", tc.rules, tc.dn, got, err, tc.want)
		}
	}
	// Two out-of-range references: Kafka's escaping misplaces the second
	// backslash and Java then throws on "$3"; the rule is refused.
	if _, err := ParsePrincipalMappingRules(`RULE:^CN=(.*)$/$2@$3/`); err == nil {
		t.Error("rule Kafka throws on was accepted")
	}
}

func TestPrincipalMapperNoMatch(t *testing.T) {
	m, err := ParsePrincipalMappingRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Name("CN=alice,OU=Eng")
	if !errors.Is(err, ErrNoMatchingRule) {
		t.Fatalf("%v, want ErrNoMatchingRule", err)
	}
}

// Java's ".", "\s" and "$" read as Java reads them, where RE2 differs.
func TestPrincipalMapperJavaClasses(t *testing.T) {
	for _, tc := range []struct {
		rules, dn string
		match     bool
	}{
		{`RULE:^CN=.$/x/`, "CN=\r", false},
		{`RULE:^CN=.$/x/`, "CN=\u2028", false},
		{`RULE:^CN=(?s).$/x/`, "CN=\r", true},
		{`RULE:^CN=\s$/x/`, "CN=\x0b", true},
		{`RULE:^CN=[\s]$/x/`, "CN=\x0b", true},
		{`RULE:^CN=\S$/x/`, "CN=\x0b", false},
		{`RULE:^CN=[.]$/x/`, "CN=.", true},
		{`RULE:^CN=\Q.*\E$/x/`, "CN=.*", true},
		{`RULE:^CN=\Q.*$/x/`, "CN=.*$", true},
	} {
		m, err := ParsePrincipalMappingRules(tc.rules)
		if err != nil {
			t.Errorf("%s: %v", tc.rules, err)
			continue
		}
		_, err = m.Name(tc.dn)
		if (err == nil) != tc.match {
			t.Errorf("%s on %q: %v, want match %v", tc.rules, tc.dn, err, tc.match)
		}
	}
}

// rawSubject encodes RDNs, last printed first, each a list of attributes.
func rawSubject(t testing.TB, rdns ...[]tlsmapATV) []byte {
	t.Helper()
	seq := make([]tlsmapRDNSET, len(rdns))
	for i, r := range rdns {
		seq[i] = tlsmapRDNSET(r)
	}
	b, err := asn1.Marshal(seq)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func atv(t testing.TB, oid asn1.ObjectIdentifier, tag int, value string) tlsmapATV {
	t.Helper()
	full, err := asn1.Marshal(asn1.RawValue{Class: asn1.ClassUniversal, Tag: tag, Bytes: []byte(value)})
	if err != nil {
		t.Fatal(err)
	}
	return tlsmapATV{Type: oid, Value: asn1.RawValue{FullBytes: full}}
}

var (
	oidCN     = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidC      = asn1.ObjectIdentifier{2, 5, 4, 6}
	oidO      = asn1.ObjectIdentifier{2, 5, 4, 10}
	oidOU     = asn1.ObjectIdentifier{2, 5, 4, 11}
	oidDC     = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	oidUID    = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
	oidEmail  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
	oidSerial = asn1.ObjectIdentifier{2, 5, 4, 5}
)

// The subject as Java's X500Principal.getName() prints it.
func TestDistinguishedNameJavaForm(t *testing.T) {
	const utf8Tag, printable, ia5, bmp = asn1.TagUTF8String, asn1.TagPrintableString, asn1.TagIA5String, asn1.TagBMPString
	for _, tc := range []struct {
		name string
		rdns [][]tlsmapATV
		want string
	}{
		{"Kafka's client", [][]tlsmapATV{
			{atv(t, oidC, printable, "US")}, {atv(t, oidO, printable, "Acme")},
			{atv(t, oidOU, printable, "Eng")}, {atv(t, oidCN, utf8Tag, "kafka-client")},
		}, "CN=kafka-client,OU=Eng,O=Acme,C=US"},
		{"email and serial number by OID, with the DER in hex", [][]tlsmapATV{
			{atv(t, oidO, printable, "Acme")}, {atv(t, oidEmail, ia5, "alice@acme.com")},
			{atv(t, oidSerial, printable, "123")}, {atv(t, oidCN, utf8Tag, "alice")},
		}, "CN=alice,2.5.4.5=#1303313233,1.2.840.113549.1.9.1=#160e616c6963654061636d652e636f6d,O=Acme"},
		{"domain components and a user id by name", [][]tlsmapATV{
			{atv(t, oidDC, ia5, "com")}, {atv(t, oidDC, ia5, "example")}, {atv(t, oidUID, utf8Tag, "jdoe")},
		}, "UID=jdoe,DC=example,DC=com"},
		{"multi-valued RDN in its encoded order", [][]tlsmapATV{
			{atv(t, oidO, printable, "Acme")}, {atv(t, oidCN, utf8Tag, "svc"), atv(t, oidUID, utf8Tag, "42")},
		}, "CN=svc+UID=42,O=Acme"},
		{"escapes", [][]tlsmapATV{
			{atv(t, oidO, utf8Tag, "Sue, Grabbit and Runn")},
			{atv(t, oidOU, utf8Tag, `a=b+c<d>e#f;g"h\i`)},
			{atv(t, oidCN, utf8Tag, "#  lead and trail  ")},
		}, `CN=\#  lead and trail\ \ ,OU=a\=b\+c\<d\>e\#f\;g\"h\\i,O=Sue\, Grabbit and Runn`},
		{"leading spaces, NUL and other characters as is", [][]tlsmapATV{
			{atv(t, oidCN, utf8Tag, "  é_ü@x*\x00")},
		}, `CN=\ \ é_ü@x*\00`},
		{"ill-formed UTF-8: one U+FFFD per maximal subpart, as Java's decoder", [][]tlsmapATV{
			{atv(t, oidCN, utf8Tag, "a\xe2\x82b\xffc\xf0\x9f\x98d\xc0\xafe\xed\xa0\x80f")},
		}, "CN=a\ufffdb\ufffdc\ufffdd\ufffd\ufffde\ufffd\ufffd\ufffdf"},
		{"a BMPString's bytes read as UTF-8, as Java does", [][]tlsmapATV{
			{atv(t, oidCN, bmp, "\x00A")},
		}, `CN=\00A`},
		{"a known attribute of a non-string type in hex", [][]tlsmapATV{
			{{Type: oidCN, Value: asn1.RawValue{FullBytes: []byte{0x02, 0x01, 0x05}}}},
		}, "CN=#020105"},
		{"empty subject", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tlsmapDN(rawSubject(t, tc.rdns...))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// A certificate made by Go's x509 package, through DistinguishedName and
// the mapper to a principal.
func TestPrincipalOfCertificate(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject: pkix.Name{
			Country:            []string{"US"},
			Province:           []string{"CA"},
			Locality:           []string{"San Francisco"},
			Organization:       []string{"Acme"},
			OrganizationalUnit: []string{"Eng"},
			CommonName:         "kafka-client",
		},
		NotBefore: time.Now().Add(-time.Hour),
		NotAfter:  time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	const dn = "CN=kafka-client,OU=Eng,O=Acme,L=San Francisco,ST=CA,C=US"
	if got := DistinguishedName(cert); got != dn {
		t.Fatalf("DistinguishedName %q, want %q", got, dn)
	}
	m, err := ParsePrincipalMappingRules(`RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Principal(cert)
	if err != nil || p.String() != "User:kafka-client@eng" {
		t.Fatal(p, err)
	}
	d, _ := ParsePrincipalMappingRules(DefaultPrincipalMappingRules)
	if p, err := d.Principal(cert); err != nil || p.String() != "User:"+dn {
		t.Fatal(p, err)
	}
	// A subject that does not decode is an error, not an empty name.
	if p, err := d.Principal(&x509.Certificate{RawSubject: []byte{0x30, 0x05}}); err == nil {
		t.Fatal(p)
	}
}

func FuzzMappingRules(f *testing.F) {
	for _, s := range []string{
		"DEFAULT",
		`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,DEFAULT`,
		`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`,
		`RULE:.*/x/`,
		`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`,
		`RULE:^CN=(?<u>.*)$/${u}-$12$0\$/U`,
	} {
		f.Add(s, "CN=Duke,OU=ServiceUsers,O=Org,C=US")
	}
	f.Add("RULE:\\Q", "CN=a\\, b+c")
	f.Fuzz(func(t *testing.T, rules, dn string) {
		if m, err := ParsePrincipalMappingRules(rules); err == nil {
			m.Name(dn)
		}
		d, err := ParsePrincipalMappingRules("DEFAULT")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := d.Name(dn); err != nil || got != dn {
			t.Fatalf("DEFAULT gave %q %v for %q", got, err, dn)
		}
		// DEFAULT after rules that do not match still gives the subject.
		n, err := ParsePrincipalMappingRules(`RULE:^\Q` + strings.ReplaceAll(dn, `\E`, "") + `\Ex$/y/, DEFAULT`)
		if err == nil && !strings.Contains(dn, `\E`) {
			if got, err := n.Name(dn); err != nil || got != dn {
				t.Fatalf("rules then DEFAULT gave %q %v for %q", got, err, dn)
			}
		}
		tlsmapDN([]byte(dn))
	})
}
