package failpoint_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shale-db/shale/internal/failpoint"
)

// The crash tests re-execute this test binary as a child that runs childMain instead of
// the tests. SHALE_FAILPOINTS is parsed before this package declares childSeam, as in a
// real program whose seams live in packages initialised after failpoint.
const (
	envChild       = "FAILPOINT_TEST_CHILD"        // set to run childMain
	envChildMarker = "FAILPOINT_TEST_CHILD_MARKER" // file the child's deferred cleanup writes
)

var childSeam = failpoint.Seam("failpoint_test.child")

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(childMain())
	}
	os.Exit(m.Run())
}

// childMain hits childSeam three times, printing a line before each hit, and writes the
// marker file from a deferred function on the way out.
func childMain() (code int) {
	defer func() {
		os.WriteFile(os.Getenv(envChildMarker), []byte("cleanup ran"), 0o600)
	}()
	if err := failpoint.Verify(); err != nil {
		fmt.Println(err)
		return 3
	}
	for i := 1; i <= 3; i++ {
		fmt.Printf("hit %d\n", i) // os.Stdout is unbuffered: the line is out before the seam
		if err := childSeam.Inject(context.Background()); err != nil {
			fmt.Printf("error: %v\n", err)
			return 1
		}
	}
	fmt.Println("done")
	return 0
}

type childResult struct {
	stdout, stderr string
	state          *os.ProcessState
	markerExists   bool
}

func startChild(t *testing.T, spec string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "marker")
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=1", envChildMarker+"="+marker, failpoint.EnvVar+"="+spec)
	if os.Getenv("GORACE") == "" {
		// A race-enabled child otherwise sleeps 1 s at exit.
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr, marker
}

func runChild(t *testing.T, spec string) childResult {
	t.Helper()
	cmd, stdout, stderr, marker := startChild(t, spec)
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("run child: %v", err)
	}
	_, statErr := os.Stat(marker)
	return childResult{stdout.String(), stderr.String(), cmd.ProcessState, statErr == nil}
}

func TestChildKilledAtSeam(t *testing.T) {
	r := runChild(t, "failpoint_test.child=after(1)->kill")
	ws := r.state.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want killed by SIGKILL (stdout %q, stderr %q)", r.state, r.stdout, r.stderr)
	}
	if r.stdout != "hit 1\nhit 2\n" {
		t.Fatalf("child stdout %q, want it to stop at the second hit", r.stdout)
	}
	if r.markerExists {
		t.Fatal("the killed child ran its deferred cleanup")
	}
}

func TestChildExitAtSeam(t *testing.T) {
	r := runChild(t, "failpoint_test.child=exit(7)")
	if r.state.ExitCode() != 7 || r.stdout != "hit 1\n" || r.markerExists {
		t.Fatalf("child: %v, stdout %q, cleanup ran %v; want exit 7 at the first hit without cleanup",
			r.state, r.stdout, r.markerExists)
	}
}

func TestChildErrorAtSeam(t *testing.T) {
	r := runChild(t, "failpoint_test.child=after(2)->error(disk full)")
	want := "hit 1\nhit 2\nhit 3\nerror: failpoint failpoint_test.child: disk full\n"
	if r.state.ExitCode() != 1 || r.stdout != want || !r.markerExists {
		t.Fatalf("child: %v, stdout %q, cleanup ran %v; want exit 1, stdout %q, cleanup",
			r.state, r.stdout, r.markerExists, want)
	}
}

func TestChildBadSpecExits2(t *testing.T) {
	r := runChild(t, "failpoint_test.child=kil")
	if r.state.ExitCode() != 2 || r.stdout != "" ||
		!strings.Contains(r.stderr, `SHALE_FAILPOINTS: failpoint: bad spec entry "failpoint_test.child=kil": unknown action "kil"`) {
		t.Fatalf("child: %v, stdout %q, stderr %q; want exit 2 before running, naming the entry", r.state, r.stdout, r.stderr)
	}
}

func TestChildUndeclaredSeamFailsVerify(t *testing.T) {
	r := runChild(t, "failpoint_test.chlid=kill")
	if r.state.ExitCode() != 3 || !strings.Contains(r.stdout, "failpoint_test.chlid") {
		t.Fatalf("child: %v, stdout %q; want Verify to reject the misspelt seam", r.state, r.stdout)
	}
}

// TestChildHeldAtSeam holds a child at a seam from outside, then releases it: the way a
// crash test inspects storage mid-operation before killing or resuming the child.
func TestChildHeldAtSeam(t *testing.T) {
	release := filepath.Join(t.TempDir(), "release")
	cmd, _, stderr, _ := startChild(t, "failpoint_test.child=once->block("+release+")")
	cmd.Stdout = nil
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "hit 1" {
		t.Fatalf("first line %q, want hit 1", lines.Text())
	}
	// The child is at (or about to reach) the seam and cannot pass it: nothing more comes
	// until the file exists.
	next := make(chan string, 4)
	go func() {
		for lines.Scan() {
			next <- lines.Text()
		}
		close(next)
	}()
	select {
	case l := <-next:
		t.Fatalf("child printed %q while held at the seam", l)
	case <-time.After(50 * time.Millisecond):
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for l := range next {
		rest = append(rest, l)
	}
	if err := cmd.Wait(); err != nil || strings.Join(rest, ",") != "hit 2,hit 3,done" {
		t.Fatalf("released child: %v, lines %q (stderr %q); want it to finish", err, rest, stderr)
	}
}
