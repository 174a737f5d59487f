package authn

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrNoMatchingRule is wrapped by the error of a subject that no mapping
// rule matches; Kafka refuses such a client (its NoMatchingRule).
var ErrNoMatchingRule = errors.New("no principal mapping rule matches the certificate subject")

// PrincipalMapper gives the principal of a client certificate by Kafka's
// ssl.principal.mapping.rules: comma-separated rules, the first that
// matches wins.
//
//	RULE:pattern/replacement/   pattern must match the whole subject; the
//	                            subject with every match of pattern
//	                            replaced (Java's String.replaceAll) is
//	                            the name; $1 and ${name} refer to groups
//	RULE:pattern/replacement/L  the same, lower-cased
//	RULE:pattern/replacement/U  the same, upper-cased
//	DEFAULT                     the subject itself
//
// The subject is the certificate's distinguished name as Java's
// X500Principal.getName() prints it (DistinguishedName). Patterns are Java
// regular expressions run on Go's RE2: the constructs RE2 lacks
// (backreferences, lookaround, possessive and atomic groups) fail to parse,
// and those RE2 would read differently are refused at parse time (see
// tlsmapCheckPattern), so a rule that parses names what Kafka names.
type PrincipalMapper struct {
	rules []*tlsmapRule
}

// DefaultPrincipalMappingRules is Kafka's default: the subject as is.
const DefaultPrincipalMappingRules = "DEFAULT"

// Java's \s and its "." outside DOTALL, for the grammar of the rules
// string, which Kafka reads with Java regular expressions.
const (
	tlsmapSpace = `[ \t\n\x0B\f\r]`
	tlsmapDot   = `[^\n\r\x{85}\x{2028}\x{2029}]`
)

// tlsmapRuleSyntax is one rule: DEFAULT; RULE:pattern/replacement/flags,
// where a backslash escapes any character and so a "/"; or anything else,
// which the second pass refuses. Groups: 1 DEFAULT, 2 pattern,
// 3 replacement, 4 flags.
const tlsmapRuleSyntax = `(DEFAULT)|RULE:((?:\\` + tlsmapDot + `|[^\\/])*)/((?:\\` + tlsmapDot + `|[^\\/])*)/([LU]?)` + tlsmapDot + `*?|` + tlsmapDot + `*?`

var (
	// tlsmapSplit cuts the rules string into rules: a comma ends a rule
	// only where the rule syntax lets it, so patterns and replacements
	// may hold commas.
	tlsmapSplit = regexp.MustCompile(tlsmapSpace + `*(` + tlsmapRuleSyntax + `)` + tlsmapSpace + `*(?:,` + tlsmapSpace + `*|$)`)
	// tlsmapParse reads one rule from its start; what it leaves is an
	// error.
	tlsmapParse = regexp.MustCompile(`\A(?:` + tlsmapRuleSyntax + `)`)
)

// ParsePrincipalMappingRules reads rules in Kafka's syntax. Empty rules
// between commas are ignored, as Kafka ignores them; a string with no rule
// at all is refused, since it would refuse every client.
func ParsePrincipalMappingRules(rules string) (*PrincipalMapper, error) {
	// Java's String.trim: every character up to the space.
	rules = strings.TrimFunc(rules, func(r rune) bool { return r <= ' ' })
	m := &PrincipalMapper{}
	for _, loc := range tlsmapSplit.FindAllStringSubmatchIndex(rules, -1) {
		text := rules[loc[2]:loc[3]]
		r, err := tlsmapParseRule(text)
		if err != nil {
			return nil, err
		}
		if r != nil {
			m.rules = append(m.rules, r)
		}
	}
	if len(m.rules) == 0 {
		return nil, fmt.Errorf("principal mapping rules %q: no rule (DEFAULT keeps the subject as is)", rules)
	}
	return m, nil
}

// Name maps a distinguished name, as DistinguishedName prints it. The
// error wraps ErrNoMatchingRule when no rule matches.
func (m *PrincipalMapper) Name(dn string) (string, error) {
	for _, r := range m.rules {
		if name, ok := r.apply(dn); ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("%w: %q, rules %s", ErrNoMatchingRule, dn, m)
}

// Principal is the principal of a client certificate: User and the mapped
// name of its subject, as Kafka's DefaultKafkaPrincipalBuilder gives it.
func (m *PrincipalMapper) Principal(cert *x509.Certificate) (Principal, error) {
	dn, err := tlsmapDN(cert.RawSubject)
	if err != nil {
		return Principal{}, fmt.Errorf("client certificate subject: %w", err)
	}
	name, err := m.Name(dn)
	if err != nil {
		return Principal{}, err
	}
	return Principal{Type: "User", Name: name}, nil
}

// String lists the rules as Kafka's SslPrincipalMapper prints them.
func (m *PrincipalMapper) String() string {
	parts := make([]string, len(m.rules))
	for i, r := range m.rules {
		parts[i] = r.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// tlsmapRule is one rule. A nil re is DEFAULT.
type tlsmapRule struct {
	pattern, replacement string // as written, for String
	lower, upper         bool

	re *regexp.Regexp
	// whole matches when re matches the whole subject (Java's matches()).
	whole *regexp.Regexp
	// after tells whether re matches the empty string right after a
	// match; see apply.
	after    *regexp.Regexp
	template []tlsmapPart
}

// tlsmapPart is a piece of a replacement: literal text, or group's text
// when group >= 0.
type tlsmapPart struct {
	lit   string
	group int
}

func (r *tlsmapRule) String() string {
	if r.re == nil {
		return "DEFAULT"
	}
	s := "RULE:" + r.pattern + "/" + r.replacement
	switch {
	case r.lower:
		s += "/L"
	case r.upper:
		s += "/U"
	}
	return s
}

// tlsmapParseRule reads one rule; nil, nil is an empty rule.
func tlsmapParseRule(text string) (*tlsmapRule, error) {
	loc := tlsmapParse.FindStringSubmatchIndex(text)
	if loc == nil || loc[1] != len(text) {
		end := 0
		if loc != nil {
			end = loc[1]
		}
		return nil, fmt.Errorf("principal mapping rule %q: not DEFAULT or RULE:pattern/replacement/[LU] (unmatched %q)", text, text[end:])
	}
	switch {
	case loc[2] >= 0:
		return &tlsmapRule{}, nil
	case loc[4] < 0:
		return nil, nil
	}
	r := &tlsmapRule{
		pattern:     text[loc[4]:loc[5]],
		replacement: text[loc[6]:loc[7]],
		lower:       text[loc[8]:loc[9]] == "L",
		upper:       text[loc[8]:loc[9]] == "U",
	}
	goPattern, err := tlsmapCheckPattern(r.pattern)
	if err != nil {
		return nil, fmt.Errorf("principal mapping rule %q: pattern: %w", text, err)
	}
	if r.re, err = regexp.Compile(goPattern); err != nil {
		return nil, fmt.Errorf("principal mapping rule %q: pattern: %w", text, err)
	}
	// goPattern compiled alone, so its parentheses balance and it can be
	// wrapped; an error here would be a case this reasoning missed, and
	// is still an error rather than a panic.
	if r.whole, err = regexp.Compile(`\A(?:` + goPattern + `)\z`); err != nil {
		return nil, fmt.Errorf("principal mapping rule %q: pattern: %w", text, err)
	}
	if r.after, err = regexp.Compile(`\A(?s:.)(?:` + goPattern + `)`); err != nil {
		return nil, fmt.Errorf("principal mapping rule %q: pattern: %w", text, err)
	}
	if r.template, err = tlsmapTemplate(r.replacement, r.re); err != nil {
		return nil, fmt.Errorf("principal mapping rule %q: replacement: %w", text, err)
	}
	return r, nil
}

// apply gives the rule's name for dn, or false when the rule does not
// match it.
func (r *tlsmapRule) apply(dn string) (string, bool) {
	if r.re == nil {
		return dn, true
	}
	if !r.whole.MatchString(dn) {
		return "", false
	}
	// Kafka replaces every match of the pattern in dn, not only the whole
	// one it checked. Java's search, after a non-empty match, may match
	// the empty string where that match ended; Go's skips it. Both agree
	// otherwise, so the matches are Go's plus those empty ones.
	var b strings.Builder
	last := 0
	for _, m := range r.re.FindAllStringSubmatchIndex(dn, -1) {
		b.WriteString(dn[last:m[0]])
		r.expand(&b, dn, m)
		last = m[1]
		if m[1] > m[0] && r.emptyAt(dn, m[1]) {
			r.expand(&b, dn, nil)
		}
	}
	b.WriteString(dn[last:])
	name := b.String()
	switch {
	case r.lower:
		name = tlsmapLower(name)
	case r.upper:
		name = tlsmapUpper(name)
	}
	return name, true
}

// emptyAt reports whether the pattern's first match from end is empty.
// The rune before end is matched too, so that \b and ^ see what Java's
// search sees there.
func (r *tlsmapRule) emptyAt(dn string, end int) bool {
	_, size := utf8.DecodeLastRuneInString(dn[:end])
	start := end - size
	loc := r.after.FindStringIndex(dn[start:])
	return loc != nil && loc[1] == size
}

// expand writes the replacement for one match; m nil is an empty match,
// whose groups are all empty.
func (r *tlsmapRule) expand(b *strings.Builder, dn string, m []int) {
	for _, p := range r.template {
		if p.group < 0 {
			b.WriteString(p.lit)
			continue
		}
		if m != nil && m[2*p.group] >= 0 {
			b.WriteString(dn[m[2*p.group]:m[2*p.group+1]])
		}
	}
}

// tlsmapCheckPattern refuses the Java constructs that Go's RE2 accepts but
// reads differently, and rewrites the two whose Java meaning RE2 can
// spell: "." (Java leaves out \r, U+0085, U+2028 and U+2029 too) and \s
// (Java's holds \x0B). It gives the pattern to compile.
func tlsmapCheckPattern(p string) (string, error) {
	var out strings.Builder
	inClass, classStart, inQuote := false, false, false
	dotAll := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		if inQuote {
			if strings.HasPrefix(p[i:], `\E`) {
				inQuote = false
				out.WriteString(`\E`)
				i++
				continue
			}
			out.WriteByte(c)
			continue
		}
		wasClassStart := classStart
		classStart = false
		switch c {
		case '\\':
			if i+1 >= len(p) {
				return "", errors.New("trailing backslash")
			}
			n := p[i+1]
			switch {
			case n >= '0' && n <= '9':
				// Java: a backreference (\1) or an octal escape (\0nn); RE2:
				// an octal escape, so \12 would silently change meaning.
				return "", fmt.Errorf(`\%c: backreferences and octal escapes are not supported`, n)
			case n == 'v' || n == 'V':
				// Java: any vertical whitespace; RE2: \x0B only.
				return "", fmt.Errorf(`\%c is not supported; spell the characters out`, n)
			case n == 'Q':
				inQuote = true
				out.WriteString(`\Q`)
			case n == 's' && !inClass:
				out.WriteString(tlsmapSpace)
			case n == 'S' && !inClass:
				out.WriteString(`[^ \t\n\x0B\f\r]`)
			case n == 's':
				out.WriteString(` \t\n\x0B\f\r`)
			case n == 'S':
				return "", errors.New(`\S inside a character class is not supported`)
			default:
				out.WriteByte(c)
				out.WriteByte(n)
			}
			i++
			continue
		case '[':
			if inClass {
				// Java: a nested class, a union; RE2: a literal "[" (and
				// [:alpha:] a POSIX class Java does not have).
				return "", errors.New("nested character classes are not supported")
			}
			inClass, classStart = true, true
			if strings.HasPrefix(p[i+1:], "^") {
				out.WriteString("[^")
				i++
				continue
			}
		case ']':
			if inClass && !wasClassStart {
				inClass = false
			}
		case '&':
			if inClass && strings.HasPrefix(p[i:], "&&") {
				// Java: class intersection; RE2: two literal "&".
				return "", errors.New("character class intersection (&&) is not supported")
			}
		case '.':
			if !inClass && !dotAll {
				out.WriteString(tlsmapDot)
				continue
			}
		case '(':
			if !inClass && strings.HasPrefix(p[i+1:], "?") {
				flags := p[i+2:]
				if strings.HasPrefix(flags, "P") {
					return "", errors.New("(?P<name>...) is not Java syntax; use (?<name>...)")
				}
				for _, la := range []string{"=", "!", "<=", "<!", ">"} {
					if strings.HasPrefix(flags, la) {
						return "", fmt.Errorf("(?%s...): lookaround and atomic groups are not supported", la)
					}
				}
				end := strings.IndexAny(flags, ":)")
				if end > 0 && strings.Trim(flags[:end], "imsUxdu-") == "" {
					on, _, _ := strings.Cut(flags[:end], "-")
					if strings.Contains(flags[:end], "U") {
						// Java: Unicode character classes; RE2: ungreedy.
						return "", errors.New("the U flag is not supported")
					}
					if strings.Contains(on, "s") {
						// From here on "." is RE2's own; a later (?-s) is
						// rare enough to leave to RE2's reading.
						dotAll = true
					}
				}
			}
		}
		out.WriteByte(c)
	}
	s := out.String()
	if inQuote {
		// Java's \Q runs to the end; closing it lets the pattern be
		// wrapped.
		s += `\E`
	}
	return s, nil
}

// tlsmapTemplate reads a replacement as Kafka uses it: first Kafka turns
// $n with n beyond the pattern's groups into a literal, then Java's
// Matcher reads \x as x, $n as group n (as many digits as name a group)
// and ${name} as a named group. What Java would throw on when the rule
// matches is an error here, when the rules are read.
func tlsmapTemplate(replacement string, re *regexp.Regexp) ([]tlsmapPart, error) {
	groups := re.NumSubexp()
	s, err := tlsmapEscapeBackrefs(utf16.Encode([]rune(replacement)), groups)
	if err != nil {
		return nil, err
	}
	var parts []tlsmapPart
	var lit []uint16
	flush := func() {
		if len(lit) > 0 {
			parts = append(parts, tlsmapPart{lit: string(utf16.Decode(lit)), group: -1})
			lit = nil
		}
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch c {
		case '\\':
			i++
			if i == len(s) {
				return nil, errors.New("character to be escaped is missing")
			}
			lit = append(lit, s[i])
			i++
		case '$':
			i++
			if i == len(s) {
				return nil, errors.New("illegal group reference: group index is missing")
			}
			var ref int
			if s[i] == '{' {
				i++
				start := i
				for i < len(s) && s[i] < 0x80 && tlsmapIsAlnum(byte(s[i])) {
					i++
				}
				name := string(utf16.Decode(s[start:i]))
				switch {
				case name == "":
					return nil, errors.New("named capturing group has 0 length name")
				case i == len(s) || s[i] != '}':
					return nil, errors.New("named capturing group is missing trailing '}'")
				case name[0] >= '0' && name[0] <= '9':
					return nil, fmt.Errorf("capturing group name {%s} starts with digit character", name)
				}
				ref = re.SubexpIndex(name)
				if ref < 0 {
					return nil, fmt.Errorf("no group with name {%s}", name)
				}
				i++
			} else {
				if s[i] < '0' || s[i] > '9' {
					return nil, errors.New("illegal group reference")
				}
				ref = int(s[i] - '0')
				i++
				// As many digits as still name a group.
				for i < len(s) && s[i] >= '0' && s[i] <= '9' {
					next := ref*10 + int(s[i]-'0')
					if next > groups {
						break
					}
					ref = next
					i++
				}
				if ref > groups {
					return nil, fmt.Errorf("no group %d", ref)
				}
			}
			flush()
			parts = append(parts, tlsmapPart{group: ref})
		default:
			lit = append(lit, c)
			i++
		}
	}
	flush()
	return parts, nil
}

func tlsmapIsAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// tlsmapEscapeBackrefs is Kafka's treatment of $n beyond the pattern's
// groups, made to give what Kafka gives, quirks included: a backslash goes
// before each such $n, at its offset in the replacement as written, so
// after the first insertion later ones land one character early per
// insertion, as in Kafka. It works on UTF-16, as Java's strings do.
func tlsmapEscapeBackrefs(s []uint16, groups int) ([]uint16, error) {
	if groups == 0 {
		return s, nil
	}
	orig := s
	value := append([]uint16(nil), s...)
	for i := 0; i < len(orig); i++ {
		if orig[i] != '$' || i+1 >= len(orig) || orig[i+1] < '0' || orig[i+1] > '9' {
			continue
		}
		start := i + 1
		end := start
		for end < len(orig) && orig[end] >= '0' && orig[end] <= '9' {
			end++
		}
		digits := string(utf16.Decode(orig[start:end]))
		i = end - 1
		if digits[0] == '0' {
			continue
		}
		n, err := strconv.ParseInt(digits, 10, 32)
		if err != nil {
			// Java's Integer.parseInt throws here.
			return nil, fmt.Errorf("group reference $%s out of range", digits)
		}
		for n > int64(groups) && n >= 10 {
			n /= 10
		}
		if n > int64(groups) {
			at := start - 1
			if at > len(value) {
				at = len(value)
			}
			value = append(value[:at:at], append([]uint16{'\\'}, value[at:]...)...)
		}
	}
	return value, nil
}

// tlsmapLower and tlsmapUpper are Java's String.toLowerCase and
// toUpperCase in an English locale where they differ from Go's: Java maps
// some characters to several (İ to i̇, ß to SS, the Latin ligatures) and a
// final Σ to ς.
func tlsmapLower(s string) string {
	if !strings.ContainsAny(s, "\u0130\u03a3") {
		return strings.ToLower(s)
	}
	rs := []rune(s)
	var b strings.Builder
	for i, r := range rs {
		switch {
		case r == '\u0130':
			b.WriteString("i\u0307")
		case r == '\u03a3' && tlsmapFinalSigma(rs, i):
			b.WriteRune('\u03c2')
		default:
			b.WriteString(strings.ToLower(string(r)))
		}
	}
	return b.String()
}

// tlsmapFinalSigma is Unicode's Final_Sigma: a cased letter before (case
// ignorable ones skipped), none after.
func tlsmapFinalSigma(rs []rune, i int) bool {
	cased := func(r rune) bool { return strings.ToLower(string(r)) != strings.ToUpper(string(r)) }
	ignorable := func(r rune) bool { return r == '\'' || r == '.' || r == ':' || r == '\u00ad' || r == '\u2019' }
	before := false
	for j := i - 1; j >= 0; j-- {
		if ignorable(rs[j]) {
			continue
		}
		before = cased(rs[j])
		break
	}
	if !before {
		return false
	}
	for j := i + 1; j < len(rs); j++ {
		if ignorable(rs[j]) {
			continue
		}
		return !cased(rs[j])
	}
	return true
}

// tlsmapUpperSpecial holds Unicode's unconditional one-to-many upper-case
// mappings (SpecialCasing.txt) outside the Greek extended block, whose
// letters with a iota subscript Java upper-cases to two and Go to one.
var tlsmapUpperSpecial = map[rune]string{
	'\u00df': "SS", '\u0149': "\u02bcN", '\u01f0': "J\u030c",
	'\u0390': "\u0399\u0308\u0301", '\u03b0': "\u03a5\u0308\u0301", '\u0587': "\u0535\u0552",
	'\u1e96': "H\u0331", '\u1e97': "T\u0308", '\u1e98': "W\u030a", '\u1e99': "Y\u030a", '\u1e9a': "A\u02be",
	'\ufb00': "FF", '\ufb01': "FI", '\ufb02': "FL", '\ufb03': "FFI", '\ufb04': "FFL", '\ufb05': "ST", '\ufb06': "ST",
	'\ufb13': "\u0544\u0546", '\ufb14': "\u0544\u0535", '\ufb15': "\u0544\u053b", '\ufb16': "\u054e\u0546", '\ufb17': "\u0544\u053d",
}

func tlsmapUpper(s string) string {
	var b strings.Builder
	for _, r := range s {
		if v, ok := tlsmapUpperSpecial[r]; ok {
			b.WriteString(v)
			continue
		}
		b.WriteString(strings.ToUpper(string(r)))
	}
	return b.String()
}

// DistinguishedName gives the certificate's subject as Java's
// X500Principal.getName() prints it (RFC 2253), which is what Kafka's
// mapping rules see: the last RDN first, "," between RDNs and "+" within
// one; CN, C, L, ST, O, OU, STREET, DC and UID by name, any other
// attribute (emailAddress, serialNumber, ...) as its OID and "#" with the
// hex of its DER value; the same for a value that is not a string; in a
// string value a backslash before , = + < > # ; " \ and before leading
// and trailing spaces, \00 for NUL, all else as is. Go's
// pkix.Name.String differs in each of these.
func DistinguishedName(cert *x509.Certificate) string {
	dn, err := tlsmapDN(cert.RawSubject)
	if err != nil {
		// A certificate crypto/x509 parsed has a subject that decodes;
		// Principal reports the error of one built by hand.
		return ""
	}
	return dn
}

// tlsmapATV is an attribute with its value undecoded, so that its ASN.1
// type and bytes are known.
type tlsmapATV struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// tlsmapRDNSET is one RDN; encoding/asn1 reads a slice type whose name
// ends in SET as a SET OF.
type tlsmapRDNSET []tlsmapATV

var tlsmapKeywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

func tlsmapDN(raw []byte) (string, error) {
	var rdns []tlsmapRDNSET
	rest, err := asn1.Unmarshal(raw, &rdns)
	if err != nil {
		return "", err
	}
	if len(rest) != 0 {
		return "", errors.New("trailing data after the subject")
	}
	var b strings.Builder
	for i := len(rdns) - 1; i >= 0; i-- {
		if i < len(rdns)-1 {
			b.WriteByte(',')
		}
		for j, atv := range rdns[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			tlsmapWriteATV(&b, atv)
		}
	}
	return b.String(), nil
}

func tlsmapWriteATV(b *strings.Builder, atv tlsmapATV) {
	oid := atv.Type.String()
	kw, named := tlsmapKeywords[oid]
	if !named {
		kw = oid
	}
	b.WriteString(kw)
	b.WriteByte('=')
	if !named || !tlsmapIsString(atv.Value) {
		b.WriteByte('#')
		b.WriteString(hex.EncodeToString(atv.Value.FullBytes))
		return
	}
	// Java reads the bytes of every string type as UTF-8, a BMPString's
	// too.
	var esc []rune
	for _, r := range tlsmapJavaUTF8(atv.Value.Bytes) {
		switch {
		case strings.ContainsRune(`,=+<>#;"\`, r):
			esc = append(esc, '\\', r)
		case r == 0:
			esc = append(esc, '\\', '0', '0')
		default:
			esc = append(esc, r)
		}
	}
	lead := 0
	for lead < len(esc) && (esc[lead] == ' ' || esc[lead] == '\r') {
		lead++
	}
	trail := len(esc) - 1
	for trail >= 0 && (esc[trail] == ' ' || esc[trail] == '\r') {
		trail--
	}
	for i, r := range esc {
		if i < lead || i > trail {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
}

// tlsmapIsString is Java's list of the ASN.1 string types it prints as
// text: PrintableString, T61String, IA5String, GeneralString, BMPString,
// UTF8String.
func tlsmapIsString(v asn1.RawValue) bool {
	if v.Class != asn1.ClassUniversal {
		return false
	}
	switch v.Tag {
	case asn1.TagPrintableString, asn1.TagT61String, asn1.TagIA5String, 27, asn1.TagBMPString, asn1.TagUTF8String:
		return true
	}
	return false
}

// tlsmapJavaUTF8 decodes UTF-8 as Java's decoder does: one U+FFFD for each
// maximal ill-formed subpart (Unicode's recommended practice), where Go's
// range over a string gives one for each byte.
func tlsmapJavaUTF8(b []byte) []rune {
	out := make([]rune, 0, len(b))
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r != utf8.RuneError || size > 1 {
			out = append(out, r)
			b = b[size:]
			continue
		}
		out = append(out, utf8.RuneError)
		b = b[tlsmapIllFormed(b):]
	}
	return out
}

// tlsmapIllFormed is the length of the maximal subpart at the start of b,
// which does not begin a well-formed sequence: the lead byte and the
// continuation bytes that still fit it.
func tlsmapIllFormed(b []byte) int {
	lo, hi := byte(0x80), byte(0xbf)
	var need int
	switch c := b[0]; {
	case c >= 0xc2 && c <= 0xdf:
		need = 1
	case c == 0xe0:
		need, lo = 2, 0xa0
	case c == 0xed:
		need, hi = 2, 0x9f
	case c >= 0xe1 && c <= 0xef:
		need = 2
	case c == 0xf0:
		need, lo = 3, 0x90
	case c == 0xf4:
		need, hi = 3, 0x8f
	case c >= 0xf1 && c <= 0xf3:
		need = 3
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(b); n++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		lo, hi = 0x80, 0xbf
	}
	return n
}
