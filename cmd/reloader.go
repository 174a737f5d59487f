package cmd

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/inorder-proxy/inorder/config"
	"github.com/inorder-proxy/inorder/metrics"
	"github.com/inorder-proxy/inorder/proxy"
)

// settleTime gathers the burst of events one save makes (an editor's
// write, rename and chmod; a ConfigMap's symlink swap) into one reload.
const settleTime = 250 * time.Millisecond

// reloader re-reads the configuration on SIGHUP and when the --config file
// changes: the settings in proxy.ReloadableSettings apply to new
// connections, the log level and shutdown grace at once; a change to any
// other setting is refused with a log line and the running value kept; an
// invalid configuration keeps the running one whole. Connections already
// open are never touched. Every reload is counted by result.
type reloader struct {
	flags *pflag.FlagSet
	base  config.Config
	// adjust applies to each re-read configuration what the command
	// applied at start (dev's embedded upstream). Nil changes nothing.
	adjust func(*config.Config)
	apply  func(config.Config) error // the proxy's Reload
	level  *slog.LevelVar
	log    *slog.Logger
	m      *metrics.Metrics
	// hooks run after every reload, valid or not, for what is re-read
	// from files of its own (the listeners' certificates). Their errors
	// are logged.
	hooks []func() error

	mu      sync.Mutex
	running config.Config
	// wanted is what the file and flags asked for when the running
	// configuration was last applied: running, but for the settings a
	// reload refused. A change to the file that resolves to it again is
	// no change.
	wanted config.Config
}

// cmdReloadable are the settings applied outside the proxy.
var cmdReloadable = []string{"log-level", "shutdown-grace"}

func reloadable(name string) bool {
	return slices.Contains(proxy.ReloadableSettings, name) || slices.Contains(cmdReloadable, name)
}

// current returns the running configuration.
func (r *reloader) current() config.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running
}

// reload re-reads the configuration and applies what it may.
func (r *reloader) reload(trigger string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.runHooks()
	next, err := r.resolve()
	r.applyLocked(trigger, next, err)
}

// reloadIfChanged reloads when the file and flags now resolve to another
// configuration than the one last applied, whatever triggered that reload
// (a SIGHUP included), so that a touch reloads nothing and a file written
// back to an earlier content does.
func (r *reloader) reloadIfChanged() {
	path := r.flags.Lookup(config.FlagConfig).Value.String()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		// Between a remove and the rename that follows it; the
		// rename brings another event.
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	next, err := r.resolve()
	if err == nil && len(config.Changed(r.wanted, next)) == 0 {
		return
	}
	defer r.runHooks()
	r.applyLocked("file changed", next, err)
}

// resolve reads the file and flags as at start.
func (r *reloader) resolve() (config.Config, error) {
	next, err := config.Resolve(r.flags, r.base)
	if err == nil && r.adjust != nil {
		r.adjust(&next)
	}
	return next, err
}

// applyLocked applies next, read by resolve with err, keeping the running
// value of each setting that needs a restart. The caller holds r.mu.
func (r *reloader) applyLocked(trigger string, next config.Config, err error) {
	if err != nil {
		r.log.Error("configuration not reloaded: keeping the running one", "trigger", trigger, "err", err)
		r.m.ConfigReload(metrics.ReloadFailure)
		return
	}
	asked := next
	var applied, refused []string
	for _, name := range config.Changed(r.running, next) {
		if reloadable(name) {
			applied = append(applied, name)
			continue
		}
		refused = append(refused, name)
		running, _ := config.Get(r.running, name)
		wanted, _ := config.Get(next, name)
		r.log.Warn("setting needs a restart: keeping the running value", "trigger", trigger, "setting", name, "running", running, "new", wanted)
	}
	if err := config.Keep(&next, r.running, refused); err != nil {
		r.log.Error("configuration not reloaded: keeping the running one", "trigger", trigger, "err", err)
		r.m.ConfigReload(metrics.ReloadFailure)
		return
	}
	if err := r.apply(next); err != nil {
		r.log.Error("configuration not reloaded: keeping the running one", "trigger", trigger, "err", err)
		r.m.ConfigReload(metrics.ReloadFailure)
		return
	}
	r.running, r.wanted = next, asked
	result := metrics.ReloadSuccess
	if len(refused) > 0 {
		result = metrics.ReloadPartial
	}
	r.m.ConfigReload(result)
	// The outcome is logged under the more verbose of the old and the new
	// level: a reload to log-level warn still says that it happened.
	level := r.level.Level()
	if lv, err := next.SlogLevel(); err == nil {
		level = lv
	}
	if level < r.level.Level() {
		r.level.Set(level)
	}
	r.log.Info("configuration reloaded", "trigger", trigger, "applied", applied, "refused", refused)
	r.level.Set(level)
}

func (r *reloader) runHooks() {
	for _, h := range r.hooks {
		if err := h(); err != nil {
			r.log.Warn("reload: kept the previous files", "err", err)
		}
	}
}

// start begins watching for SIGHUP and changes to the --config file, and
// returns the loop that reloads on them until ctx ends. The watches are in
// place when start returns, so that a file changed once the proxy says it
// serves is never missed. A file that cannot be watched is logged; SIGHUP
// still works.
func (r *reloader) start() (run func(ctx context.Context)) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	var changed <-chan struct{}
	stopWatch := func() {}
	if f := r.flags.Lookup(config.FlagConfig); f != nil && f.Value.String() != "" {
		path := f.Value.String()
		ch, stop, err := watchFile(path, r.log, nil)
		if err != nil {
			r.log.Warn("config file not watched; reload with SIGHUP", "file", path, "err", err)
		} else {
			stopWatch = stop
			changed = ch
		}
	}
	return func(ctx context.Context) {
		defer signal.Stop(hup)
		defer stopWatch()
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				r.reload("SIGHUP")
			case <-changed:
				r.reloadIfChanged()
			}
		}
	}
}

// watchCounts counts a file watch's work, for tests: events seen in the
// directory, events naming the file or a link on its way (the only ones
// handled: each restarts the settle timer), signals sent once events
// settle, and reads of the file by watchReload.
type watchCounts struct {
	seen, handled, signals, reads atomic.Int64
}

// runWatch runs a watch: filter reads its source and kicks on each event
// that may change the file, until done ends or the source is closed;
// settleKicks turns the kicks into signals on the returned channel. stop
// ends both, closing the source.
func runWatch(filter func(kick chan<- struct{}, done <-chan struct{}), closeSource func() error, counts *watchCounts) (<-chan struct{}, func()) {
	kick := make(chan struct{}, 1)
	out := make(chan struct{}, 1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(kick)
		filter(kick, done)
	}()
	go func() {
		defer wg.Done()
		settleKicks(kick, done, out, counts)
	}()
	return out, func() {
		close(done)
		_ = closeSource()
		wg.Wait()
	}
}

// settleKicks sends a signal on out once kicks have stopped for
// settleTime, until kick is closed or done ends.
func settleKicks(kick, done <-chan struct{}, out chan<- struct{}, counts *watchCounts) {
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	defer settle.Stop()
	for {
		select {
		case <-done:
			return
		case _, ok := <-kick:
			if !ok {
				return
			}
			settle.Reset(settleTime)
		case <-settle.C:
			counts.signals.Add(1)
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}
}

// kickOnce wakes the settle loop without waiting: a kick already pending
// says the same.
func kickOnce(kick chan<- struct{}) {
	select {
	case kick <- struct{}{}:
	default:
	}
}

// pathNames returns the names in dir that dir/name resolves through: name
// itself and, while the path is a symlink that stays inside dir, the first
// name of each target (a ConfigMap's inorder.yaml -> ..data/inorder.yaml,
// ..data -> ..2026_12_05_03_30_00.1234). A name is listed before it is
// looked up, so a link to a name not there yet is watched for that name.
func pathNames(dir, name string) map[string]bool {
	names := map[string]bool{name: true}
	rest := name
	// The kernel's own bound on the links one path may follow.
	for range 40 {
		first, tail, _ := strings.Cut(rest, string(filepath.Separator))
		names[first] = true
		target, err := os.Readlink(filepath.Join(dir, first))
		if err != nil {
			// Not a link (the file, or a real directory whose
			// contents the directory watch does not see), or gone.
			return names
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(dir, target)
		}
		rel, err := filepath.Rel(dir, filepath.Join(target, tail))
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			// Out of the watched directory.
			return names
		}
		rest = rel
	}
	return names
}

// watchReload calls reload whenever the file at path changes (an event
// names it and its bytes differ from the last reload's), until
// ctx ends; the returned function waits for that. what names the
// file in log lines. A file that cannot be watched is logged: SIGHUP
// still re-reads it.
func watchReload(ctx context.Context, path, what string, reload func() error, log *slog.Logger) (stop func()) {
	return watchReloadCounted(ctx, path, what, reload, log, nil)
}

// watchReloadCounted is watchReload counting its work in counts (nil
// counts nothing).
func watchReloadCounted(ctx context.Context, path, what string, reload func() error, log *slog.Logger, counts *watchCounts) (stop func()) {
	if counts == nil {
		counts = new(watchCounts)
	}
	changed, stopWatch, err := watchFile(path, log, counts)
	if err != nil {
		log.Warn(what+" not watched; re-read with SIGHUP", "file", path, "err", err)
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// From the first signal on, the file is reloaded only when its
		// bytes changed (a touch, a rename of the same bytes into place).
		var last []byte
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				counts.reads.Add(1)
				now, err := os.ReadFile(path)
				if err == nil && last != nil && bytes.Equal(now, last) {
					continue
				}
				last = now
				if err := reload(); err != nil {
					// Tried again at the next event, even unchanged.
					last = nil
					log.Warn(what+" not reloaded", "err", err)
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
		stopWatch()
	}
}
