package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"koe/testkit"
)

// The sandboxed program tries each way out this tool has had, and each
// must fail: as root (CI) and as an unprivileged user
// (TestSandboxUnprivileged runs this test again as one).
func TestSandboxEscapes(t *testing.T) {
	requireSandbox(t)
	secret := "koe-secret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Setenv("KOE_SANDBOX_TEST_SECRET", secret)
	outside := filepath.Join(t.TempDir(), "victim.txt")
	if err := os.WriteFile(outside, []byte("safe"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := pythonBox(t, PythonSettings{})
	got, err := runPython(t, b, strings.ReplaceAll(escapeProgram, "OUTSIDE", outside))
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	var r struct {
		UID, EUID                          int
		Status                             map[string]string
		RemountUsr, TmpfsOnUsr, NewUserNS  int
		Wrote                              []string
		Environ                            string
		Shmget, Msgget, Memfd, KeyctlErrno int
	}
	if err := json.Unmarshal([]byte(got), &r); err != nil {
		t.Fatalf("the program's report %q: %v", got, err)
	}
	if r.UID == 0 || r.EUID == 0 {
		t.Errorf("the program is root: uid %d euid %d", r.UID, r.EUID)
	}
	for _, capSet := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		if r.Status[capSet] != "0000000000000000" {
			t.Errorf("%s is %s: the program holds capabilities", capSet, r.Status[capSet])
		}
	}
	if r.Status["NoNewPrivs"] != "1" {
		t.Errorf("NoNewPrivs is %q", r.Status["NoNewPrivs"])
	}
	if r.RemountUsr == 0 || r.TmpfsOnUsr == 0 {
		t.Errorf("mounted over /usr: remount errno %d, tmpfs errno %d", r.RemountUsr, r.TmpfsOnUsr)
	}
	if r.NewUserNS == 0 {
		t.Error("the program made a user namespace, where it would hold every capability")
	}
	if len(r.Wrote) > 0 {
		t.Errorf("the program wrote %v", r.Wrote)
	}
	if data, _ := os.ReadFile(outside); string(data) != "safe" {
		t.Errorf("the file outside was changed: %q", data)
	}
	if strings.Contains(r.Environ, secret) || strings.Contains(r.Environ, "KOE_SANDBOX_TEST_SECRET") {
		t.Error("koe's environment reached the sandbox: the secret set in it is in a process's /proc/PID/environ there")
	}
	if !strings.Contains(r.Environ, "PATH=/usr/bin:/bin") {
		t.Errorf("the program's environment %q has no PATH", r.Environ)
	}
	// System V IPC and memory files would hold memory that no limit
	// counts; keyrings are not confined by the namespaces.
	for name, errno := range map[string]int{"shmget": r.Shmget, "msgget": r.Msgget, "memfd_create": r.Memfd, "keyctl": r.KeyctlErrno} {
		if errno != int(syscall.EPERM) {
			t.Errorf("%s: errno %d, want EPERM", name, errno)
		}
	}
}

// escapeProgram reports, as JSON, who the program is and how each escape
// went: an errno (0: it worked), or the paths it wrote.
const escapeProgram = `import ctypes, json, os, platform
libc = ctypes.CDLL(None, use_errno=True)
def errno(rc):
    return 0 if rc >= 0 else ctypes.get_errno()
r = {"UID": os.getuid(), "EUID": os.geteuid()}
environ = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            environ.append(open("/proc/%s/environ" % pid).read())
        except OSError:
            pass
r["Environ"] = "\n".join(environ)
r["Status"] = {k: v.strip() for k, v in (l.split(":", 1) for l in open("/proc/self/status") if ":" in l)}
MS_REMOUNT, MS_BIND = 32, 4096
r["RemountUsr"] = errno(libc.mount(b"none", b"/usr", None, MS_REMOUNT | MS_BIND, None))
r["TmpfsOnUsr"] = errno(libc.mount(b"tmpfs", b"/usr", b"tmpfs", 0, None))
r["NewUserNS"] = errno(libc.unshare(0x10000000))
r["Wrote"] = []
for path in ["/usr/koe-was-here", "/etc/koe-was-here", "/koe-was-here", "/dev/koe-was-here",
             "/proc/sys/kernel/hostname", "/proc/sysrq-trigger", "OUTSIDE"]:
    try:
        with open(path, "w") as f:
            f.write("pwned")
        r["Wrote"].append(path)
    except OSError:
        pass
r["Shmget"] = errno(libc.shmget(0, 4096, 0o1600))
r["Msgget"] = errno(libc.msgget(0, 0o1600))
try:
    os.memfd_create("m")
    r["Memfd"] = 0
except OSError as e:
    r["Memfd"] = e.errno
keyctl = {"x86_64": 250, "aarch64": 219, "riscv64": 219}[platform.machine()]
r["KeyctlErrno"] = errno(libc.syscall(keyctl, 0, -3, 0))
print(json.dumps(r))`

// A fork bomb stops at the run's own process limit, and that limit is
// the run's alone: twenty runs at once each reach it, none fails to start.
func TestSandboxProcessLimit(t *testing.T) {
	requireSandbox(t)
	b := pythonBox(t, PythonSettings{})
	const runs = 20
	var wg sync.WaitGroup
	results := make([]string, runs)
	errs := make([]error, runs)
	for i := range runs {
		wg.Go(func() { results[i], errs[i] = runPython(t, b, forkBomb) })
	}
	wg.Wait()
	succeeded := 0
	for i := range runs {
		forked, _, _ := strings.Cut(results[i], " ")
		n, convErr := strconv.Atoi(forked)
		switch {
		case errs[i] != nil:
			t.Errorf("run %d failed: %v", i, errs[i])
		case convErr != nil:
			t.Errorf("run %d: %q", i, results[i])
		case n >= defaultPythonProcs || n < defaultPythonProcs-4:
			t.Errorf("run %d forked %d processes; the limit is %d: %q", i, n, defaultPythonProcs, results[i])
		case !strings.Contains(results[i], "tools.python.max_processes"):
			t.Errorf("run %d does not name the limit: %q", i, results[i])
		default:
			succeeded++
		}
	}
	t.Logf("%d of %d concurrent fork bombs ran and stopped at the limit", succeeded, runs)
}

// forkBomb forks until it cannot, then prints how many children it made
// and why it stopped. The children wait for the end of a pipe the parent
// closes when it is done.
const forkBomb = `import os
r, w = os.pipe()
kids, why = [], ""
for _ in range(1000):
    try:
        pid = os.fork()
    except OSError as e:
        why = e.strerror
        break
    if pid == 0:
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    kids.append(pid)
os.close(w)
for pid in kids:
    os.waitpid(pid, 0)
print(len(kids), why)`

// What a run writes is bounded in bytes and in files, for /work, /tmp and
// /dev/shm together, and the bound comes out of its memory.
func TestSandboxFilesBounded(t *testing.T) {
	requireSandbox(t)
	s := PythonSettings{MemoryMB: 128, FilesMB: 64, MaxFiles: 50}
	b := pythonBox(t, s)
	got, err := runPython(t, b, filesProgram)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	report, notes, _ := strings.Cut(got, "\n")
	var r struct {
		Bytes               int
		BytesWhy            string
		WorkAfter, ShmAfter string
		Files               int
		FilesWhy            string
		Allocated           bool
	}
	if err := json.Unmarshal([]byte(report), &r); err != nil {
		t.Fatalf("the program's report %q: %v", got, err)
	}
	if r.Bytes > s.FilesMB<<20 || r.Bytes < (s.FilesMB-1)<<20 || r.BytesWhy != "No space left on device" {
		t.Errorf("/tmp took %d bytes (%s); the bound is %d MB", r.Bytes, r.BytesWhy, s.FilesMB)
	}
	if r.WorkAfter != "No space left on device" || r.ShmAfter != "No space left on device" {
		t.Errorf("with /tmp full, /work: %q, /dev/shm: %q; they share its bound", r.WorkAfter, r.ShmAfter)
	}
	if r.Files != s.MaxFiles || r.FilesWhy != "No space left on device" {
		t.Errorf("made %d files (%s); the bound is %d", r.Files, r.FilesWhy, s.MaxFiles)
	}
	if r.Allocated {
		t.Error("the program took memory_mb less half files_mb as well as its files")
	}
	if !strings.Contains(notes, "tools.python.files_mb") || !strings.Contains(notes, "tools.python.max_files") {
		t.Errorf("the report does not name the keys: %q", notes)
	}
}

// filesProgram fills /tmp with files of 4 MB until it cannot, tries
// /work and /dev/shm then, empties /tmp and makes empty files until it
// cannot, and last tries to allocate memory_mb less half files_mb. It
// stops by itself at twice TestSandboxFilesBounded's bounds.
const filesProgram = `import json, os
r = {"Bytes": 0}
try:
    for i in range(2 * 64 // 4):
        with open("/tmp/f%d" % i, "wb") as f:
            for _ in range(64):
                f.write(b"x" * 65536)
                f.flush()
                r["Bytes"] += 65536
except OSError as e:
    r["BytesWhy"] = e.strerror
for key, path in (("WorkAfter", "/work/x"), ("ShmAfter", "/dev/shm/x")):
    try:
        with open(path, "wb") as f:
            f.write(b"x" * 65536)
        r[key] = "wrote"
    except OSError as e:
        r[key] = e.strerror
for name in os.listdir("/tmp"):
    os.remove("/tmp/" + name)
for path in ("/work/x", "/dev/shm/x"):
    if os.path.exists(path):
        os.remove(path)
r["Files"] = 0
try:
    for i in range(2 * 50):
        open("/work/e%d" % i, "w").close()
        r["Files"] += 1
except OSError as e:
    r["FilesWhy"] = e.strerror
try:
    x = bytearray((128 - 64 // 2) << 20)
    r["Allocated"] = True
except MemoryError:
    r["Allocated"] = False
print(json.dumps(r))
raise SystemExit(0 if r["Files"] else 1)`

// The files a run writes are not root's on the host, where they can be
// reached through the program's /proc entry while it runs: they are the
// run's host user's.
func TestSandboxFilesOwner(t *testing.T) {
	requireSandbox(t)
	b := pythonBox(t, PythonSettings{})
	marker := "owned-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	code := fmt.Sprintf(`import os
os.mkfifo("/work/gate")
open("/work/%s", "w").write("x")
print(open("/work/gate").read())`, marker)
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := runPython(t, b, code)
		done <- result{out, err}
	}()
	path := waitForRunFile(t, marker)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	owner := int(info.Sys().(*syscall.Stat_t).Uid)
	want := os.Geteuid()
	if want == 0 {
		want = defaultPythonUID
	}
	if owner == 0 || owner != want {
		t.Errorf("the run's file is uid %d's on the host, want %d's", owner, want)
	}
	// Let the program end.
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "gate"), []byte("seen"), 0); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.out != "seen" {
		t.Errorf("run: %q, %v", r.out, r.err)
	}
}

// waitForRunFile finds a running program's /work/name through /proc.
func waitForRunFile(t *testing.T, name string) string {
	t.Helper()
	var found string
	testkit.Eventually(t, "a running program writes /work/"+name, func() bool {
		matches, _ := filepath.Glob("/proc/[0-9]*/root/work/" + name)
		if len(matches) > 0 {
			found = matches[0]
		}
		return found != ""
	})
	return found
}

// A run whose sandbox fails before the program runs is an error, not
// output the model reads as the program's.
func TestSandboxFailedRunIsError(t *testing.T) {
	requireSandbox(t)
	p, err := preparePython(PythonSettings{Command: "/nonexistent/python3"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.run(context.Background(), "print('hello')")
	var failure *sandboxFailure
	if !errors.As(err, &failure) || !strings.Contains(err.Error(), "/nonexistent/python3") {
		t.Errorf("a sandbox that could not start the program: %q, %v", got, err)
	}
	// New refuses such a configuration at once.
	if _, err := New([]string{pythonName}, Options{Python: PythonSettings{Command: "/nonexistent/python3"}}); err == nil ||
		!strings.Contains(err.Error(), "tools.python.unsandboxed") {
		t.Errorf("New with an interpreter the sandbox lacks: %v", err)
	}
}

// Where user namespaces cannot be made, the tool refuses to start and says
// what it needs; it does not run code with less. The test makes such a
// place: a user namespace of its own that may make none.
func TestSandboxRefusedWithoutUserNamespaces(t *testing.T) {
	requireSandbox(t)
	if os.Getenv(testRoleVar) == "no-userns" {
		if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0"), 0); err != nil {
			t.Fatalf("could not forbid user namespaces: %v", err)
		}
		_, err := New([]string{pythonName}, Options{})
		if err == nil || !strings.Contains(err.Error(), "user namespaces") || !strings.Contains(err.Error(), "tools.python.unsandboxed") {
			t.Fatalf("New without user namespaces: %v", err)
		}
		return
	}
	attr := &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
	}
	rerunTests(t, "no-userns", attr, "TestSandboxRefusedWithoutUserNamespaces")
}

// The escapes and the limits hold for a koe that is not root, too. As
// root, the test runs them again as an unprivileged user; as one, the
// other tests already do.
func TestSandboxUnprivileged(t *testing.T) {
	requireSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("not root: the other tests run as this unprivileged user")
	}
	const uid = 42424
	attr := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}
	rerunTests(t, "unprivileged", attr,
		"TestSandboxEscapes", "TestSandboxProcessLimit", "TestSandboxFilesBounded", "TestSandboxFilesOwner",
		"TestSandboxFailedRunIsError", "TestSandboxRefusedWithoutUserNamespaces", "TestSandboxInheritsNoDescriptor",
		"TestPythonUnsandboxedIsNotRoot",
		"TestPythonRuns", "TestPythonConfined", "TestPythonLimits")
}

// testRoleVar tells a test run by rerunTests which part it plays.
const testRoleVar = "KOE_TOOLS_TEST_ROLE"

// rerunTests runs the named tests of this test binary in a child process
// started with attr, and fails unless each of them passes there. The
// binary is copied where any user may run it.
func rerunTests(t *testing.T, role string, attr *syscall.SysProcAttr, tests ...string) {
	t.Helper()
	// Not t.TempDir, whose parent only its owner may enter.
	dir, err := os.MkdirTemp("", "koe-tools-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "tools.test")
	if err := copyFile(self, bin); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run=^("+strings.Join(tests, "|")+")$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, testRoleVar + "=" + role, "CI=" + os.Getenv("CI")}
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the tests as %s: %v\n%s", role, err, out)
	}
	for _, name := range tests {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("%s did not pass as %s:\n%s", name, role, out)
		}
	}
	t.Logf("as %s:\n%s", role, out)
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// Unsandboxed (tools.python.unsandboxed), the program is still never
// root, and koe's environment does not reach it either.
func TestPythonUnsandboxedIsNotRoot(t *testing.T) {
	requireSandbox(t)
	t.Setenv("KOE_SANDBOX_TEST_SECRET", "koe-secret")
	b := pythonBox(t, PythonSettings{Unsandboxed: true})
	got, err := runPython(t, b, `import os
open("mine.txt", "w").write("ok")
print(os.getuid(), os.geteuid(), os.stat("mine.txt").st_uid, "KOE_SANDBOX_TEST_SECRET" in open("/proc/self/environ").read())`)
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.Itoa(os.Geteuid())
	if want == "0" {
		want = strconv.Itoa(defaultPythonUID)
	}
	if got != strings.Repeat(want+" ", 3)+"False" {
		t.Errorf("unsandboxed: uid, euid, its file's owner and whether it sees koe's environment: %q, want %s's, and no", got, want)
	}
}

// A descriptor koe inherited from what started it does not reach the
// program.
func TestSandboxInheritsNoDescriptor(t *testing.T) {
	requireSandbox(t)
	// Without O_CLOEXEC, as a parent process would have left it.
	fd, err := syscall.Open(filepath.Join(t.TempDir(), "inherited"), syscall.O_CREAT|syscall.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	keepDescriptorsFromRuns()
	b := pythonBox(t, PythonSettings{})
	got, err := runPython(t, b, `import os
print(sorted(int(fd) for fd in os.listdir("/proc/self/fd")))`)
	// 0, 1 and 2, and the one listdir opens.
	if err != nil || got != "[0, 1, 2, 3]" {
		t.Errorf("the program's descriptors: %q, %v (koe's inherited one is %d)", got, err, fd)
	}
}
