package node

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

func TestTheNodeIDSurvivesARestartButNotInDevMode(t *testing.T) {
	dir := t.TempDir()
	id1, err := LoadOrCreateID(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	id2, err := LoadOrCreateID(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if id1 != id2 || !wanted.ValidToken(id1) {
		t.Fatalf("IDs %q and %q", id1, id2)
	}
	fi, err := os.Stat(filepath.Join(dir, IDFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("ID file: %v %v", fi, err)
	}
	devDir := t.TempDir()
	d1, _ := LoadOrCreateID(devDir, true)
	d2, _ := LoadOrCreateID(devDir, true)
	if d1 == d2 {
		t.Fatal("dev mode reused an ID")
	}
	if entries, _ := os.ReadDir(devDir); len(entries) != 0 {
		t.Fatalf("dev mode persisted something: %v", entries)
	}
	if err := os.WriteFile(filepath.Join(dir, IDFile), []byte("not.valid\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateID(dir, false); err == nil {
		t.Fatal("an invalid stored ID was accepted")
	}
}

const cpuinfo = `processor	: 0
model name	: Test CPU @ 2.40GHz
cpu MHz		: 2400.000

processor	: 1
model name	: Test CPU @ 2.40GHz
cpu MHz		: 2600.500
`

func TestFingerprintReadsProc(t *testing.T) {
	proc := fstest.MapFS{
		"cpuinfo":              {Data: []byte(cpuinfo)},
		"meminfo":              {Data: []byte("MemTotal:       16384 kB\nMemFree: 1 kB\n")},
		"sys/kernel/osrelease": {Data: []byte("6.1.0-test\n")},
	}
	attrs, err := Fingerprint(proc, "host-a")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		AttrCores: "2", AttrMHz: "2600", AttrTotalMHz: "5200", AttrCPUModel: "Test CPU @ 2.40GHz",
		AttrMemory: "16777216", AttrKernel: "6.1.0-test", AttrHostname: "host-a",
	}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("%s = %q, want %q", k, attrs[k], v)
		}
	}
	if attrs[AttrOS] == "" || attrs[AttrArch] == "" {
		t.Errorf("os/arch missing: %v", attrs)
	}
	// A missing file is reported but the rest stays.
	attrs, err = Fingerprint(fstest.MapFS{"meminfo": {Data: []byte("MemTotal: 1 kB\n")}}, "")
	if err == nil || attrs[AttrMemory] != "1024" || attrs[AttrCores] == "" {
		t.Fatalf("partial fingerprint: %v %v", attrs, err)
	}
}

func TestFingerprintOfThisMachine(t *testing.T) {
	if _, err := os.Stat("/proc/cpuinfo"); err != nil {
		t.Skip("no /proc")
	}
	attrs, err := Fingerprint(ProcFS("/proc"), "h")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{AttrCores, AttrMemory, AttrKernel} {
		if attrs[k] == "" {
			t.Errorf("%s missing", k)
		}
	}
}

func TestBuildFillsDefaultsAndDrivers(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	drivers := map[string]model.DriverInfo{
		"docker": {Detected: true, Healthy: true, Attributes: map[string]string{"version": "20.10", "driver.docker.privileged.enabled": "false"}},
		"exec":   {Detected: false},
	}
	n := Build("id-1", Config{Hostname: "host-a"}, map[string]string{AttrCores: "2"}, drivers, wanted.Intent{}, now)
	if n.Name != "host-a" || n.Datacenter != "dc1" || n.NodePool != "default" || n.Meta == nil || n.Attributes == nil {
		t.Fatalf("defaults: %+v", n)
	}
	if n.Attributes["driver.docker"] != "1" || n.Attributes["driver.docker.version"] != "20.10" ||
		n.Attributes["driver.docker.privileged.enabled"] != "false" || n.Attributes[AttrCores] != "2" {
		t.Fatalf("attributes: %v", n.Attributes)
	}
	if _, ok := n.Attributes["driver.exec"]; ok {
		t.Fatal("an undetected driver was advertised")
	}
	if n.Status != model.NodeStatusReady || !n.Ready() || !n.HeartbeatAt.Equal(now) {
		t.Fatalf("status: %+v", n)
	}
	if m := Build("id-1", Config{}, nil, nil, wanted.Intent{}, now); m.Name != "id-1" || m.Attributes == nil || m.Meta == nil {
		t.Fatalf("name fallback / nil maps: %+v", m)
	}
	d := Build("id-1", Config{Name: "x"}, nil, nil, wanted.Intent{Drain: &model.DrainStrategy{}}, now)
	if d.Ready() || d.Eligibility != model.Ineligible || d.Drain == nil {
		t.Fatalf("drain intent not merged: %+v", d)
	}
}

// fakeWriter fails the first failures writes, then records.
type fakeWriter struct {
	mu       sync.Mutex
	failures int
	calls    int
	written  []*model.Node
}

func (f *fakeWriter) PutNode(_ context.Context, n *model.Node) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls <= f.failures {
		return 0, errors.New("no responders")
	}
	f.written = append(f.written, n)
	return uint64(len(f.written)), nil
}

func (f *fakeWriter) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.written)
}

func TestRegistrationRetriesThenHeartbeatsAndPokes(t *testing.T) {
	w := &fakeWriter{failures: 3}
	var mu sync.Mutex
	intent := wanted.Intent{}
	var observed, observedErrs int
	build := func() *model.Node {
		mu.Lock()
		defer mu.Unlock()
		return Build("n1", Config{}, nil, nil, intent, time.Now())
	}
	observe := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		observed++
		if err != nil {
			observedErrs++
		}
	}
	hb := NewHeartbeater(HeartbeatConfig{Period: 50 * time.Millisecond, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond, Observe: observe}, w, build, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- hb.Run(ctx) }()
	// The writer records a write before the heartbeater counts it and
	// observes it: wait for all three.
	settled := func() bool {
		mu.Lock()
		n := observed
		mu.Unlock()
		return w.count() >= 4 && hb.Status().Heartbeats >= 4 && n >= 7
	}
	deadline := time.Now().Add(5 * time.Second)
	for !settled() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if w.count() < 4 {
		t.Fatalf("only %d writes", w.count())
	}
	if s := hb.Status(); !s.Registered || s.Heartbeats < 4 {
		t.Fatalf("status %+v", s)
	}
	mu.Lock()
	if observedErrs != 3 || observed < 7 {
		t.Errorf("observed %d writes, %d errors; want >= 7 and 3", observed, observedErrs)
	}
	mu.Unlock()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run returned %v", err)
	}
}

func TestAPokePushesTheMergedIntentAtOnce(t *testing.T) {
	w := &fakeWriter{}
	var mu sync.Mutex
	intent := wanted.Intent{}
	build := func() *model.Node {
		mu.Lock()
		defer mu.Unlock()
		return Build("n1", Config{}, nil, nil, intent, time.Now())
	}
	// A one-hour period: only registration and the poke can write in time.
	hb := NewHeartbeater(HeartbeatConfig{Period: time.Hour}, w, build, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = hb.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for w.count() < 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	intent = wanted.Intent{Eligibility: model.Ineligible}
	mu.Unlock()
	hb.Poke()
	for w.count() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.written) != 2 {
		t.Fatalf("%d writes, want registration + poke", len(w.written))
	}
	if w.written[0].Eligibility != model.Eligible || w.written[1].Eligibility != model.Ineligible {
		t.Fatalf("eligibility %s then %s", w.written[0].Eligibility, w.written[1].Eligibility)
	}
}

// intentSrc is an IntentSource whose intent the test sets.
type intentSrc struct {
	mu   sync.Mutex
	in   wanted.Intent
	subs []chan struct{}
}

func (s *intentSrc) Subscribe() (<-chan struct{}, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := make(chan struct{}, 1)
	s.subs = append(s.subs, c)
	return c, func() {}
}

func (s *intentSrc) Intent(string) wanted.Intent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.in
}

func (s *intentSrc) set(in wanted.Intent) {
	s.mu.Lock()
	s.in = in
	subs := s.subs
	s.mu.Unlock()
	for _, c := range subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func TestFollowIntentPokesOnlyWhenTheIntentChanges(t *testing.T) {
	w := &fakeWriter{}
	src := &intentSrc{}
	hb := NewHeartbeater(HeartbeatConfig{Period: time.Hour}, w, func() *model.Node {
		return Build("n1", Config{}, nil, nil, src.Intent("n1"), time.Now())
	}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = hb.Run(ctx) }()
	waitWrites := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for w.count() < n && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if w.count() < n {
			t.Fatalf("%d writes, want %d", w.count(), n)
		}
	}
	waitWrites(1) // registration
	go FollowIntent(ctx, src, "n1", hb)
	for {
		src.mu.Lock()
		n := len(src.subs)
		src.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// An unrelated change (same intent) does not write.
	src.set(wanted.Intent{})
	time.Sleep(50 * time.Millisecond)
	if w.count() != 1 {
		t.Fatalf("a change that left the intent alone wrote: %d writes", w.count())
	}
	// Control: a drain writes at once.
	src.set(wanted.Intent{Drain: &model.DrainStrategy{}})
	waitWrites(2)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.written[1].Drain == nil || w.written[1].Eligibility != model.Ineligible {
		t.Fatalf("record after the drain intent: %+v", w.written[1])
	}
}

func TestRegistrationErrorsAreSilentDuringTheGracePeriod(t *testing.T) {
	var mu sync.Mutex
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))
	logs := func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
	w := &fakeWriter{failures: 1 << 30}
	hb := NewHeartbeater(HeartbeatConfig{Grace: 300 * time.Millisecond, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond}, w,
		func() *model.Node { return Build("n1", Config{}, nil, nil, wanted.Intent{}, time.Now()) }, log)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	go func() { _ = hb.Run(ctx) }()
	for {
		w.mu.Lock()
		calls := w.calls
		w.mu.Unlock()
		if calls >= 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if time.Since(start) < 250*time.Millisecond && strings.Contains(logs(), "level=ERROR") {
		t.Fatalf("errors logged within the grace period:\n%s", logs())
	}
	// Control: after the grace period the failures are logged.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs(), "level=ERROR msg=\"node registration failed; retrying\"") {
		if time.Now().After(deadline) {
			t.Fatalf("no error logged after the grace period:\n%s", logs())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if hb.Status().Registered || hb.Status().LastError == "" {
		t.Fatalf("status %+v", hb.Status())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestAConfiguredNodeIDIsKeptAndCannotChange: a configured ID is used and
// persisted on a new state directory (no node ID file before it: nothing
// the lost-state check could take for a node that ran); the same again is
// accepted; another one over a state directory that ran as the first is
// refused naming both; an invalid one is refused; without one (control)
// the persisted ID is used.
func TestAConfiguredNodeIDIsKeptAndCannotChange(t *testing.T) {
	dir := t.TempDir()
	if id, err := LoadOrCreateIDAs(dir, "agent-1", false); err != nil || id != "agent-1" {
		t.Fatalf("first start: %q %v", id, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, IDFile)); err != nil || string(b) != "agent-1\n" {
		t.Fatalf("persisted: %q %v", b, err)
	}
	if id, err := LoadOrCreateIDAs(dir, "agent-1", false); err != nil || id != "agent-1" {
		t.Fatalf("same again: %q %v", id, err)
	}
	if _, err := LoadOrCreateIDAs(dir, "agent-2", false); err == nil || !strings.Contains(err.Error(), `"agent-2"`) || !strings.Contains(err.Error(), `"agent-1"`) {
		t.Fatalf("another ID over a state directory that ran: %v", err)
	}
	if _, err := LoadOrCreateIDAs(t.TempDir(), "not.valid", false); err == nil {
		t.Fatal("an invalid configured ID was accepted")
	}
	if id, err := LoadOrCreateIDAs(dir, "", false); err != nil || id != "agent-1" {
		t.Fatalf("unconfigured: %q %v", id, err)
	}
}

// failingAfter is a Writer that accepts its first ok writes and refuses
// every one after, noting when each was made.
type failingAfter struct {
	mu    sync.Mutex
	ok    int
	times []time.Time
}

func (f *failingAfter) PutNode(_ context.Context, _ *model.Node) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.times = append(f.times, time.Now())
	if len(f.times) <= f.ok {
		return uint64(len(f.times)), nil
	}
	return 0, context.DeadlineExceeded // what a loaded server's timeout looks like
}

// A heartbeat that fails is retried sooner than the period, but no sooner
// than a quarter of it, however small the retry backoff is set: the
// record outlives several such tries, and a timed-out write may have
// landed. Control: retries do come, before the period is out.
func TestAFailedHeartbeatIsRetriedAtAQuarterOfThePeriodNotAtOnce(t *testing.T) {
	w := &failingAfter{ok: 1}
	const period = 400 * time.Millisecond
	hb := NewHeartbeater(HeartbeatConfig{Period: period, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond}, w,
		func() *model.Node { return &model.Node{ID: "n1"} }, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- hb.Run(ctx) }()
	time.Sleep(2 * time.Second)
	cancel()
	<-done
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.times) < 4 {
		t.Fatalf("%d writes in 2 s: the failed heartbeat was not retried", len(w.times))
	}
	// From the first failed beat on (the registration, then a beat within
	// a period), every retry comes at least a quarter period after the last.
	for i := 3; i < len(w.times); i++ {
		if gap := w.times[i].Sub(w.times[i-1]); gap < period/4-10*time.Millisecond || gap > period+50*time.Millisecond {
			t.Fatalf("retry %d came %v after the last try, want between a quarter period (%v) and the period (%v); all: %v", i, gap, period/4, period, w.times)
		}
	}
}

// lostAnswers is a Writer and Reader over one stored record: writes number
// lose (their answer fails, with the record stored or not, as landing
// says) and every other write is answered; each write's deadline is noted.
type lostAnswers struct {
	mu        sync.Mutex
	lose      func(i int) bool
	landing   bool
	stored    *model.Node
	times     []time.Time
	deadlines []time.Duration
	reads     int
}

func (f *lostAnswers) PutNode(ctx context.Context, n *model.Node) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := len(f.times)
	f.times = append(f.times, time.Now())
	dl, _ := ctx.Deadline()
	f.deadlines = append(f.deadlines, time.Until(dl))
	c := *n
	if !f.lose(i) {
		f.stored = &c
		return uint64(i + 1), nil
	}
	if f.landing {
		f.stored = &c
	}
	return 0, context.DeadlineExceeded
}

func (f *lostAnswers) ReadNode(context.Context) (*model.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.stored == nil {
		return nil, errors.New("not found")
	}
	c := *f.stored
	return &c, nil
}

// A heartbeat whose answer was lost but which landed is not written again:
// the retry reads the record back, finds that very write, and waits out
// the period from it. Controls: a lost write that did not land is written
// again at the retry; one that landed is written again when the record
// changed meanwhile (a drain), since the landed one does not say it.
func TestAHeartbeatWhoseAnswerWasLostButLandedIsNotWrittenAgain(t *testing.T) {
	const period = 800 * time.Millisecond
	run := func(t *testing.T, landing bool, build func() *model.Node) *lostAnswers {
		// The registration is answered; the first beat's answer is lost.
		w := &lostAnswers{lose: func(i int) bool { return i == 1 }, landing: landing}
		hb := NewHeartbeater(HeartbeatConfig{Period: period, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond}, w, build, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- hb.Run(ctx) }()
		// The first beat comes within a period; the retry a quarter period
		// after it; the period after the lost beat is then nearly out.
		time.Sleep(period + period/4 + period/2)
		cancel()
		<-done
		st := hb.Status()
		w.mu.Lock()
		defer w.mu.Unlock()
		if len(w.times) < 2 {
			t.Fatalf("%d writes: no beat after the registration", len(w.times))
		}
		if st.Failures != 1 {
			t.Fatalf("failures %d, want 1", st.Failures)
		}
		t.Logf("landing %v: writes at %v, %d reads, status %+v", landing, w.times, w.reads, st)
		return w
	}
	beat := func() *model.Node { return &model.Node{ID: "n1", HeartbeatAt: time.Now()} }
	t.Run("landed", func(t *testing.T) {
		w := run(t, true, beat)
		if w.reads != 1 {
			t.Fatalf("%d read-backs, want 1", w.reads)
		}
		// The next write is the next period's beat, not the retry.
		if len(w.times) > 2 {
			if gap := w.times[2].Sub(w.times[1]); gap < period-50*time.Millisecond {
				t.Fatalf("written again %v after the lost beat that landed, within its period (%v)", gap, period)
			}
		}
	})
	t.Run("control: not landed", func(t *testing.T) {
		w := run(t, false, beat)
		if len(w.times) < 3 || w.reads != 1 {
			t.Fatalf("%d writes and %d read-backs, want the lost beat written again after 1 read-back", len(w.times), w.reads)
		}
		if gap := w.times[2].Sub(w.times[1]); gap < period/4-10*time.Millisecond {
			t.Fatalf("written again %v after the lost beat, before a quarter period", gap)
		}
	})
	t.Run("control: landed, then the record changed", func(t *testing.T) {
		var writes atomic.Int32
		drained := func() *model.Node {
			n := beat()
			if writes.Add(1) > 2 { // the record built after the lost beat says drain
				n.Drain = &model.DrainStrategy{}
			}
			return n
		}
		w := run(t, true, drained)
		if len(w.times) < 3 || w.stored.Drain == nil {
			t.Fatalf("%d writes, stored drain %v: the changed record was not written", len(w.times), w.stored.Drain)
		}
	})
}

// A write waits a quarter of the planned period for its answer when that
// is longer than WriteTimeout, and WriteTimeout otherwise.
func TestAHeartbeatWritesDeadlineFitsItsPeriod(t *testing.T) {
	for _, c := range []struct {
		period, writeTimeout, want time.Duration
	}{
		{period: 40 * time.Second, writeTimeout: time.Second, want: 10 * time.Second},
		{period: 2 * time.Second, writeTimeout: time.Second, want: time.Second},
	} {
		w := &lostAnswers{lose: func(int) bool { return false }}
		hb := NewHeartbeater(HeartbeatConfig{Period: c.period, WriteTimeout: c.writeTimeout}, w, func() *model.Node { return &model.Node{ID: "n1"} }, nil)
		if _, err := hb.write(context.Background(), &model.Node{ID: "n1"}); err != nil {
			t.Fatal(err)
		}
		if got := w.deadlines[0]; got > c.want || got < c.want-time.Second/2 {
			t.Fatalf("period %v, write timeout %v: the write's deadline was %v away, want %v", c.period, c.writeTimeout, got, c.want)
		}
	}
}
