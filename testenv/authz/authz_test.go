// Package authz proves inorder's authorizer against Apache Kafka's own: the
// users and ACLs of testdata/acls.yaml are set on a Kafka node run by
// `testenv/kafka/start.sh authz` (its StandardAuthorizer) and given to
// `inorder serve --acl-file` in front of the same node, where the proxy
// authenticates upstream as the super user, so that only its own
// authorizer decides. Every case of the table runs straight at Kafka, as
// its principal, and through the proxy, with --upstream-ordering
// connection and none; the error codes per topic, partition, group and
// transactional id, the visible topic, group and transaction lists, the
// authorized operations and the described ACLs must be the same. The
// cases are franz-go requests (kmsg, sent as the principal by kgo), then
// Kafka's Java Admin, producers and consumer (AuthzClients.java, run with
// the jars of INORDER_AUTHZ_KAFKA_LIBS). CreateAcls and DeleteAcls are
// not counted: the proxy's ACLs are its file, and it refuses both by
// design, naming the file.
//
// Kafka's answers are also checked against what the table expects, which
// is what Kafka's rules give: the half that needs only Kafka runs
// wherever the authz node does, and proves the harness itself.
//
//	KAFKA_RUN_DIR=/tmp/$USER-kafka testenv/kafka/start.sh authz
//	set -a; . /tmp/$USER-kafka/authz/secrets/env; set +a
//	go test -count=1 -v ./testenv/authz
//	KAFKA_RUN_DIR=/tmp/$USER-kafka testenv/kafka/stop.sh authz
//
// The proxy half needs an inorder whose serve takes --client-sasl-mechanisms,
// --client-credentials, --acl-file and --super-users; without them it is
// logged as not run. INORDER_AUTHZ_REQUIRE_PROXY=1 turns that into a
// failure; INORDER_AUTHZ_INORDER_BIN names a built inorder to use instead
// of building this module's.
package authz

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/inorder-proxy/inorder/acl"
)

const aclFile = "testdata/acls.yaml"

// Topics every case may rely on, made by the super user before the cases.
var fixedTopics = []string{"t-alice", "t-shared", "t-secret", "t-host", "t-public", "p-data-1", "p-data-2"}

// Groups with committed offsets before the cases, so that ListGroups and
// DescribeGroups have something to show.
var fixedGroups = []string{"g-alice", "g-bob"}

// proxyFlags are the serve flags the proxy half needs.
var proxyFlags = []string{"--client-sasl-mechanisms", "--client-credentials", "--acl-file", "--super-users"}

type env struct {
	bootstrap string
	secrets   string
	users     []string
	super     string
}

func loadEnv(t *testing.T) env {
	t.Helper()
	e := env{
		bootstrap: os.Getenv("INORDER_AUTHZ_KAFKA_BOOTSTRAP"),
		secrets:   os.Getenv("INORDER_AUTHZ_KAFKA_SECRETS"),
		super:     os.Getenv("INORDER_AUTHZ_KAFKA_SUPER_USER"),
	}
	if e.bootstrap == "" || e.secrets == "" || e.super == "" {
		t.Skip("needs Apache Kafka with its authorizer: testenv/kafka/start.sh authz, then the variables of <run dir>/authz/secrets/env (INORDER_AUTHZ_KAFKA_BOOTSTRAP, INORDER_AUTHZ_KAFKA_SECRETS, INORDER_AUTHZ_KAFKA_SUPER_USER)")
	}
	e.users = strings.Split(os.Getenv("INORDER_AUTHZ_KAFKA_USERS"), ",")
	return e
}

func (e env) passwordFile(user string) string { return filepath.Join(e.secrets, user+".password") }

func (e env) password(t *testing.T, user string) string {
	t.Helper()
	b, err := os.ReadFile(e.passwordFile(user))
	if err != nil {
		t.Fatalf("password of %s: %v", user, err)
	}
	return string(b)
}

// versions caps AddPartitionsToTxn at v3: v4 and later are for brokers
// (ClusterAction), and clients send v3.
func versions() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(24, 3)
	return v
}

func newClient(t *testing.T, seed, user, password string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seed),
		kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha256Mechanism()),
		kgo.MaxVersions(versions()),
		kgo.DialTimeout(5*time.Second),
		kgo.RequestTimeoutOverhead(10*time.Second),
		kgo.RetryTimeout(5*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// outcome is what a case saw: a key (an API and the resource it names)
// and the answer (an error code, a sorted list).
type outcome map[string]string

func (o outcome) keys() []string {
	ks := make([]string, 0, len(o))
	for k := range o {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (o outcome) String() string {
	var b strings.Builder
	for _, k := range o.keys() {
		fmt.Fprintf(&b, "\n\t\t%s = %s", k, o[k])
	}
	return b.String()
}

// diff lists the keys whose answers differ, got against want.
func diff(want, got outcome) []string {
	var d []string
	for _, k := range want.keys() {
		g, ok := got[k]
		switch {
		case !ok:
			d = append(d, fmt.Sprintf("%s: want %s, missing", k, want[k]))
		case g != want[k]:
			d = append(d, fmt.Sprintf("%s: want %s, got %s", k, want[k], g))
		}
	}
	for _, k := range got.keys() {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("%s: unexpected %s", k, got[k]))
		}
	}
	return d
}

// code names an error code as Kafka does.
func code(c int16) string {
	if c == 0 {
		return "0"
	}
	if e, ok := kerr.ErrorForCode(c).(*kerr.Error); ok {
		return fmt.Sprintf("%d %s", c, e.Message)
	}
	return fmt.Sprint(c)
}

// run is one case's connection: the client of its principal, its
// broker, and the token that names what the case creates, so that
// Kafka's run and the proxy's do not meet on one name.
type run struct {
	t   *testing.T
	ctx context.Context
	cl  *kgo.Client
	tok string
	ids map[string][16]byte
	out outcome
	// msgs holds the error messages of CreateAcls and DeleteAcls answers,
	// which differ between brokers and are not compared.
	msgs map[string]string
}

// n names a resource of this run only.
func (r *run) n(base string) string { return base + "-" + r.tok }

// set records an answer; the run's token is written {run}, so that the
// answers of two runs compare.
func (r *run) set(key, val string) {
	if r.tok != "" {
		key, val = strings.ReplaceAll(key, r.tok, "{run}"), strings.ReplaceAll(val, r.tok, "{run}")
	}
	r.out[key] = val
}

func (r *run) code(key string, c int16) { r.set(key, code(c)) }

// req sends one request to the bootstrap broker (the single node, or the
// proxy's listener in front of it), as a client that already knows where
// its coordinator is: the cases pin what they send, kgo adds nothing.
func (r *run) req(key string, req kmsg.Request) kmsg.Response {
	ctx, cancel := context.WithTimeout(r.ctx, 15*time.Second)
	defer cancel()
	resp, err := r.cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) {
			r.code(key, ke.Code)
		} else {
			r.set(key, "no answer")
			r.t.Logf("%s: %v", key, err)
		}
		return nil
	}
	return resp
}

func (r *run) topicID(topic string) [16]byte { return r.ids[topic] }

func (r *run) topicName(id [16]byte, name string) string {
	if name != "" {
		return name
	}
	for n, x := range r.ids {
		if x == id {
			return n
		}
	}
	return fmt.Sprintf("%x", id)
}

// batch is one record batch of one record; pid -1 for a plain producer.
func batch(pid int64, epoch int16, seq int32, txn bool) []byte {
	rec := kmsg.Record{Key: []byte("k"), Value: []byte("v")}
	body := rec.AppendTo(nil)
	rec.Length = int32(len(body) - 1) // the zero length took one varint byte
	recs := rec.AppendTo(nil)
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		Magic:          2,
		FirstTimestamp: now,
		MaxTimestamp:   now,
		ProducerID:     pid,
		ProducerEpoch:  epoch,
		FirstSequence:  seq,
		NumRecords:     1,
		Records:        recs,
	}
	if txn {
		b.Attributes = 0x10
	}
	if pid < 0 {
		b.ProducerEpoch, b.FirstSequence = -1, -1
	}
	raw := b.AppendTo(nil)
	// Length counts what follows it; the CRC (Castagnoli) covers what
	// follows it.
	b.Length = int32(len(raw) - 12)
	raw = b.AppendTo(nil)
	b.CRC = int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b.AppendTo(nil)
}

// retriable codes a coordinator answers while it loads or finishes a
// transaction: both runs wait them out the same way.
func retriable(c int16) bool {
	switch c {
	case 14, 15, 16, 51: // COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS
		return true
	}
	return false
}

// until retries f while it answers a retriable code, for a few seconds.
func until(ctx context.Context, f func() int16) int16 {
	deadline := time.Now().Add(20 * time.Second)
	for {
		c := f()
		if !retriable(c) || time.Now().After(deadline) || ctx.Err() != nil {
			return c
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// side is where the cases run: Kafka itself, or a proxy in front of it.
type side struct {
	name string
	seed string
	tok  string
}

// harness holds what every run shares: the super user's client straight
// at Kafka, for the preparation and clean-up of cases.
type harness struct {
	t     *testing.T
	e     env
	ctx   context.Context
	admin *run
	ids   map[string][16]byte
	set   *acl.Set
}

// adminRun is the super user straight at Kafka, with a case's token.
func (h *harness) adminRun(tok string) *run {
	return &run{t: h.t, ctx: h.ctx, cl: h.admin.cl, tok: tok, ids: h.ids, out: outcome{}}
}

func (h *harness) must(what string, c int16) {
	h.t.Helper()
	if c != 0 {
		h.t.Fatalf("%s: %s", what, code(c))
	}
}

// createTopic makes a topic as the super user and waits until it has a
// leader; one already there is fine.
func (h *harness) createTopic(name string) {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req := kmsg.NewPtrCreateTopicsRequest()
		ct := kmsg.NewCreateTopicsRequestTopic()
		ct.Topic, ct.NumPartitions, ct.ReplicationFactor = name, 1, 1
		req.Topics = append(req.Topics, ct)
		req.TimeoutMillis = 10000
		resp, err := req.RequestWith(h.ctx, h.admin.cl)
		if err != nil {
			h.t.Fatalf("create %s: %v", name, err)
		}
		c := resp.Topics[0].ErrorCode
		if c == 0 || c == kerr.TopicAlreadyExists.Code {
			if h.leader(name) {
				h.ids[name] = h.topicID(name)
				return
			}
		} else if time.Now().After(deadline) {
			h.t.Fatalf("create %s: %s", name, code(c))
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("create %s: no leader", name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (h *harness) metadata(topics ...string) *kmsg.MetadataResponse {
	req := kmsg.NewPtrMetadataRequest()
	for _, n := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := h.admin.cl.SeedBrokers()[0].Request(h.ctx, req)
	if err != nil {
		h.t.Fatalf("metadata: %v", err)
	}
	return resp.(*kmsg.MetadataResponse)
}

func (h *harness) leader(name string) bool {
	m := h.metadata(name)
	return len(m.Topics) == 1 && m.Topics[0].ErrorCode == 0 && len(m.Topics[0].Partitions) > 0 && m.Topics[0].Partitions[0].Leader >= 0
}

func (h *harness) topicID(name string) [16]byte {
	m := h.metadata(name)
	return m.Topics[0].TopicID
}

// deleteTopic removes a topic as the super user and waits until Metadata
// no longer knows it, so that it shows in no later list.
func (h *harness) deleteTopic(name string) {
	h.t.Helper()
	req := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr(name)
	req.Topics = append(req.Topics, dt)
	req.TopicNames = []string{name}
	req.TimeoutMillis = 10000
	if _, err := req.RequestWith(h.ctx, h.admin.cl); err != nil {
		h.t.Fatalf("delete %s: %v", name, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := h.metadata(name)
		if len(m.Topics) == 1 && m.Topics[0].ErrorCode == kerr.UnknownTopicOrPartition.Code {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("delete %s: still listed", name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// commit commits offset 0 of a topic for a group, as the super user, so
// that the group exists (empty).
func (h *harness) commit(group, topic string) {
	h.t.Helper()
	h.coordinator(0, group)
	c := until(h.ctx, func() int16 {
		r := h.adminRun("")
		resp := offsetCommit(r, "setup commit", group, topic)
		if resp == nil {
			return -1
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	})
	h.must("commit "+group, c)
}

// coordinator waits until the coordinator of a group (typ 0) or a
// transactional id (typ 1) answers: the first ask creates its internal
// topic, and loading it takes a moment.
func (h *harness) coordinator(typ int8, key string) {
	h.t.Helper()
	c := until(h.ctx, func() int16 {
		r := h.adminRun("")
		findCoordinator(r, typ, key)
		if v, ok := r.out["findcoordinator "+key]; ok {
			return codeOf(v)
		}
		return -1
	})
	h.must("coordinator of "+key, c)
}

// deleteGroup removes a group as the super user; a group already gone is
// fine.
func (h *harness) deleteGroup(group string) {
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = []string{group}
	if _, err := h.admin.cl.SeedBrokers()[0].Request(h.ctx, req); err != nil {
		h.t.Fatalf("delete group %s: %v", group, err)
	}
}

// creations converts the ACL file to Kafka's CreateAcls creations: the
// same file the proxy reads is what Kafka's authorizer holds.
func creations(s *acl.Set) []kmsg.CreateACLsRequestCreation {
	var out []kmsg.CreateACLsRequestCreation
	for _, b := range s.Bindings() {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType = kmsg.ACLResourceType(b.ResourceType)
		c.ResourceName = b.ResourceName
		c.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
		c.Principal = b.Principal
		c.Host = b.Host
		c.Operation = kmsg.ACLOperation(b.Operation)
		c.PermissionType = kmsg.ACLPermissionType(b.Permission)
		out = append(out, c)
	}
	return out
}

// describeAll lists Kafka's ACLs as the super user.
func (h *harness) describeAll() []string {
	r := h.adminRun("")
	describeACLs(r, "acls", anyFilter())
	return strings.Split(r.out["acls"], "\n")
}

// setACLs replaces every ACL of Kafka's with those of the file, and waits
// until the authorizer holds them all.
func (h *harness) setACLs() {
	h.t.Helper()
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	dresp, err := del.RequestWith(h.ctx, h.admin.cl)
	if err != nil {
		h.t.Fatalf("delete ACLs: %v", err)
	}
	h.must("delete ACLs", dresp.Results[0].ErrorCode)
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = creations(h.set)
	resp, err := req.RequestWith(h.ctx, h.admin.cl)
	if err != nil {
		h.t.Fatalf("create ACLs: %v", err)
	}
	for i, r := range resp.Results {
		if r.ErrorCode != 0 {
			h.t.Fatalf("create ACL %v: %s %v", h.set.Bindings()[i], code(r.ErrorCode), r.ErrorMessage)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(h.describeAll()) != h.set.Len() {
		if time.Now().After(deadline) {
			h.t.Fatalf("Kafka describes %d ACLs, the file has %d", len(h.describeAll()), h.set.Len())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// setup makes the topics, groups and coordinators the cases rely on and
// gives Kafka the file's ACLs.
func setup(t *testing.T, e env) *harness {
	data, err := os.ReadFile(aclFile)
	if err != nil {
		t.Fatal(err)
	}
	set, err := acl.Parse(aclFile, data)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	h := &harness{t: t, e: e, ctx: ctx, ids: map[string][16]byte{}, set: set}
	h.admin = &run{t: t, ctx: ctx, cl: newClient(t, e.bootstrap, e.super, e.password(t, e.super)), ids: h.ids, out: outcome{}}
	for _, n := range fixedTopics {
		h.createTopic(n)
	}
	for _, n := range fixedTopics {
		r := h.adminRun("")
		produce(r, n)
		h.must("produce to "+n, codeOf(r.out["produce "+n+"/0"]))
	}
	for _, g := range fixedGroups {
		h.commit(g, "t-alice")
	}
	// The transaction coordinator: the first transactional InitProducerId
	// creates its topic.
	h.coordinator(1, "tx-setup")
	c := until(ctx, func() int16 {
		r := h.adminRun("")
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = kmsg.StringPtr("tx-setup")
		req.TransactionTimeoutMillis = 10000
		resp := r.req("init", req)
		if resp == nil {
			return -1
		}
		return resp.(*kmsg.InitProducerIDResponse).ErrorCode
	})
	h.must("transaction coordinator", c)
	h.setACLs()
	return h
}

func codeOf(s string) int16 {
	var c int16
	fmt.Sscan(s, &c)
	return c
}

// tcase is one case of the table.
type tcase struct {
	name string
	user string
	// prep and clean run as the super user straight at Kafka, before and
	// after each run of the case, with the run's token.
	prep, clean func(h *harness, tok string)
	do          func(r *run)
	// want is Kafka's answer by its documented rules.
	want outcome
	// refused: the proxy refuses by design what Kafka may do (CreateAcls,
	// DeleteAcls: the proxy's ACLs live in its file); a difference here is
	// the documented one, not a disagreement.
	refused bool
	// password, when set, replaces the principal's: a client that fails
	// to authenticate.
	password string
}

func (h *harness) runCase(s side, c tcase) (outcome, map[string]string) {
	tok := s.tok
	if c.prep != nil {
		c.prep(h, tok)
	}
	password := c.password
	if password == "" {
		password = h.e.password(h.t, c.user)
	}
	r := &run{t: h.t, ctx: h.ctx, cl: newClient(h.t, s.seed, c.user, password), tok: tok, ids: h.ids, out: outcome{}}
	c.do(r)
	r.cl.Close()
	if c.clean != nil {
		c.clean(h, tok)
	}
	return r.out, r.msgs
}

// TestAuthorizerDifferential runs the table straight at Kafka and, when
// the inorder binary takes the proxy's flags, through inorder serve.
func TestAuthorizerDifferential(t *testing.T) {
	e := loadEnv(t)
	h := setup(t, e)
	table := cases()
	for i, c := range table {
		if c.password == "" && !slices.Contains(e.users, c.user) {
			t.Fatalf("case %d %q: %s is not a user of the authz node (%v)", i, c.name, c.user, e.users)
		}
	}

	// Kafka's half: its answers against the table.
	kafka := make([]outcome, len(table))
	mismatches := 0
	for i, c := range table {
		kafka[i], _ = h.runCase(side{name: "kafka", seed: e.bootstrap, tok: "kq7"}, c)
		if d := diff(c.want, kafka[i]); len(d) > 0 {
			mismatches++
			t.Errorf("Kafka %s as %s: not what the table expects:\n\t%s\n\tKafka answered:%s", c.name, c.user, strings.Join(d, "\n\t"), kafka[i])
		}
	}
	t.Logf("authz against Kafka: %d cases, %d answers other than the table's", len(table), mismatches)

	bin, missing := inorderBinary(t)
	proxied := len(missing) == 0
	if !proxied {
		msg := fmt.Sprintf("authz differential: the proxy half did not run: inorder serve lacks %s", strings.Join(missing, ", "))
		if os.Getenv("INORDER_AUTHZ_REQUIRE_PROXY") != "" {
			t.Fatal(msg)
		}
		t.Log(msg)
	}
	orderings := []string{"connection", "none"}
	var creds string
	if proxied {
		creds = credentials(t, e, bin)
	}
	seeds := make([]string, len(orderings))
	for i, ordering := range orderings {
		if !proxied {
			break
		}
		t.Run("ordering="+ordering, func(t *testing.T) {
			seed := serve(t, e, bin, creds, ordering, 22700+100*i)
			seeds[i] = seed
			differences, known, refused := 0, 0, 0
			agreed := map[string]bool{}
			for j, c := range table {
				got, msgs := h.runCase(side{name: "proxy", seed: seed, tok: fmt.Sprintf("pq%d", i)}, c)
				d := diff(kafka[j], got)
				id := c.name + " as " + c.user
				switch {
				case len(d) == 0:
					agreed[id] = true
				case c.refused:
					// The proxy must refuse, not claim to have done it.
					for _, k := range got.keys() {
						if (strings.HasPrefix(k, "createacl ") || strings.HasPrefix(k, "deleteacls ")) && !strings.HasSuffix(k, " matched") && got[k] == ok {
							differences++
							t.Errorf("%s as %s: the proxy answered %s = 0; it keeps its ACLs in its file and must refuse", c.name, c.user, k)
						}
						// A principal Kafka would let alter ACLs is told where they are.
						if got[k] == code(44) && !strings.Contains(msgs[k], filepath.Base(aclFile)) {
							differences++
							t.Errorf("%s as %s: %s refused with %q, which does not name the ACL file", c.name, c.user, k, msgs[k])
						}
					}
					refused++
					t.Logf("%s as %s: refused by the proxy by design (its ACLs are its file):\n\t%s", c.name, c.user, strings.Join(d, "\n\t"))
				case knownDifferences[id]:
					known++
					t.Logf("%s: a known difference from Kafka (testdata/differences.txt):\n\t%s", id, strings.Join(d, "\n\t"))
				default:
					differences++
					t.Errorf("%s as %s: the proxy differs from Kafka:\n\t%s", c.name, c.user, strings.Join(d, "\n\t"))
				}
			}
			for id := range knownDifferences {
				if agreed[id] {
					t.Errorf("%s: now answered as Kafka answers it; take it out of testdata/differences.txt", id)
				}
			}
			t.Logf("authz differential: %d cases, %d differences, %d of them known (testdata/differences.txt) (--upstream-ordering %s; not counted: %d CreateAcls/DeleteAcls cases the proxy refuses by design, %d of them answered otherwise than by Kafka)",
				len(table)-countRefused(table), differences+known, known, ordering, countRefused(table), refused)
		})
	}

	// Kafka's Java clients, after every franz-go case: the groups they
	// make must not show in those cases' lists.
	libs := os.Getenv("INORDER_AUTHZ_KAFKA_LIBS")
	if libs == "" {
		t.Log("authz differential: the Java clients' cases did not run: INORDER_AUTHZ_KAFKA_LIBS (Kafka's jars) is unset")
		return
	}
	jkafka := h.javaCases(libs, e.bootstrap, "kj7")
	if d := diff(javaWant, jkafka); len(d) > 0 {
		t.Errorf("Kafka's Java clients against Kafka: not what the table expects:\n\t%s\n\tKafka answered:%s", strings.Join(d, "\n\t"), jkafka)
	}
	t.Logf("authz Java clients against Kafka: %d cases, %d answers other than the table's", len(javaWant), len(diff(javaWant, jkafka)))
	for i, ordering := range orderings {
		if !proxied {
			break
		}
		t.Run("java/ordering="+ordering, func(t *testing.T) {
			seed := serve(t, e, bin, creds, ordering, 22700+100*i)
			got := h.javaCases(libs, seed, fmt.Sprintf("pj%d", i))
			d := diff(jkafka, got)
			for _, x := range d {
				t.Errorf("Java client through the proxy differs from Kafka: %s", x)
			}
			t.Logf("authz differential (Java clients): %d cases, %d differences (--upstream-ordering %s)", len(jkafka), len(d), ordering)
		})
	}
}

// javaCases runs AuthzClients.java against seed and gives its answers;
// the consumer group it makes is deleted after.
func (h *harness) javaCases(libs, seed, tok string) outcome {
	h.t.Helper()
	cmd := exec.CommandContext(h.ctx, "java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dorg.apache.logging.log4j.level=OFF",
		"-cp", filepath.Join(libs, "*"), "AuthzClients.java", seed, h.e.secrets, tok)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	h.deleteGroup("g-alice-" + tok)
	h.deleteGroup("g-alice-cg-" + tok)
	if err != nil {
		h.t.Fatalf("AuthzClients.java: %v\n%s\n%s", err, out, stderr.Bytes())
	}
	r := &run{tok: tok, out: outcome{}}
	// The clients' own logging may share standard output.
	for _, line := range strings.Split(string(out), "\n") {
		k, v, found := strings.Cut(strings.TrimPrefix(line, "case "), " = ")
		if found && strings.HasPrefix(line, "case ") {
			r.set(k, v)
		}
	}
	return r.out
}

func countRefused(table []tcase) int {
	n := 0
	for _, c := range table {
		if c.refused {
			n++
		}
	}
	return n
}

// inorderBinary builds inorder (or takes the one INORDER_AUTHZ_INORDER_BIN
// names) and says which of the proxy's flags its serve lacks.
func inorderBinary(t *testing.T) (string, []string) {
	t.Helper()
	bin := os.Getenv("INORDER_AUTHZ_INORDER_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "inorder")
		build := exec.Command("go", "build", "-o", bin, "github.com/inorder-proxy/inorder/cmd/inorder")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	help, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("inorder serve --help: %v\n%s", err, help)
	}
	var missing []string
	for _, f := range proxyFlags {
		if !bytes.Contains(help, []byte(f+" ")) {
			missing = append(missing, f)
		}
	}
	return bin, missing
}

// credentials writes the client credentials file of the proxy, for the
// users and passwords Kafka has.
func credentials(t *testing.T, e env, bin string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "credentials.yaml")
	for _, u := range e.users {
		cmd := exec.Command(bin, "credentials", "add", "--file", file, "--user", u, "--mechanism", "SCRAM-SHA-256", "--password-file", e.passwordFile(u))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("inorder credentials add %s: %v\n%s", u, err, out)
		}
	}
	return file
}

// serve starts the proxy in front of the authz node, authenticating
// upstream as the super user, and gives its bootstrap address.
func serve(t *testing.T, e env, bin, creds, ordering string, port int) string {
	t.Helper()
	dir := t.TempDir()
	listen := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	cmd := exec.Command(bin, "serve",
		"--listen", listen,
		"--upstream", e.bootstrap,
		"--upstream-ordering", ordering,
		"--upstream-sasl-mechanism", "SCRAM-SHA-256",
		"--upstream-sasl-username", e.super,
		"--upstream-sasl-password-file", e.passwordFile(e.super),
		"--client-sasl-mechanisms", "SCRAM-SHA-256",
		"--client-credentials", creds,
		"--acl-file", aclFile,
		"--super-users", "User:"+e.super,
		"--admin-listen", "",
	)
	stdout, _ := os.Create(filepath.Join(dir, "serve.out"))
	stderr, _ := os.Create(filepath.Join(dir, "serve.log"))
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
			t.Logf("inorder serve's log:\n%s", log)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := os.ReadFile(filepath.Join(dir, "serve.out"))
		if bytes.Contains(out, []byte("clients connect to")) {
			return listen
		}
		if cmd.ProcessState != nil || time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
			t.Fatalf("inorder serve did not start:\n%s", log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// knownDifferences are the cases, "name as user", in which the proxy is
// known to answer otherwise than Kafka's authorizer, one a line in
// testdata/differences.txt ('#' starts a comment). The list only
// shrinks: a case not on it that differs fails the test, and so does a
// case on it that now agrees.
var knownDifferences = func() map[string]bool {
	b, err := os.ReadFile(filepath.Join("testdata", "differences.txt"))
	if err != nil {
		panic(err)
	}
	m := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			m[line] = true
		}
	}
	return m
}()
