package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"strings"
	"time"

	"koe/internal/pdftext/pdftest"
	"koe/testkit/loadrun"
)

const (
	// uploadTimeout bounds the wait for one file's answer: a koe without
	// bounds spent over a minute of CPU on one of them.
	uploadTimeout = 90 * time.Second
	// uploadLeaveAfter is when the leaving uploader leaves, and
	// uploadWatch how long koe's CPU is watched after.
	uploadLeaveAfter = 1 * time.Second
	uploadWatch      = 5 * time.Second
	// uploadTermAfter is when koe gets SIGTERM while a file is read.
	uploadTermAfter = 1 * time.Second
	// uploadCharacter is the default character, whose documents these are.
	uploadCharacter = "koe_default"
)

func uploadsScenario() scenario {
	return scenario{
		name: "uploads",
		about: "hostile files, one at a time, to a character's documents: a 0.5 MB PDF whose font's character map " +
			"inflates to 200 MB, then 9.9 MB of one word; 1.8 MB of one word (a million tokens) whose uploader " +
			"leaves after 1 s; the same while koe gets SIGTERM: time, koe's CPU and peak RSS for each",
		figure:     "s of koe CPU for the first two files",
		watchesKoe: true,
		run:        runUploads,
	}
}

// hostileFile is one upload of the scenario.
type hostileFile struct {
	name string
	data []byte
}

func runUploads(ctx context.Context, e *env) outcome {
	out := outcome{value: nan(), noKoe: true}
	files := []hostileFile{
		{"cmap.pdf", pdftest.InflatingCMap(200<<20, 1)},
		{"word.txt", oneWord(9_900_000)},
	}
	var steps []string
	var cpu time.Duration
	answered := 0
	// Each step restarts the peak: the row's is the highest of them.
	for _, f := range files {
		r := e.measureUpload(ctx, f, uploadTimeout)
		steps = append(steps, r.String())
		cpu += r.cpu
		out.peak = max(out.peak, r.peak)
		if r.status != 0 {
			answered++
		}
	}
	if answered == len(files) {
		out.value = cpu.Seconds()
	}
	// Two names: a koe that goes on reading the first after its uploader
	// left would refuse the second as busy.
	steps = append(steps, e.leaveUpload(ctx, hostileFile{"letters.txt", oneWord(1_800_000)}))
	out.peak = max(out.peak, e.peak())
	term, exit := e.termDuringUpload(ctx, hostileFile{"letters2.txt", oneWord(1_800_000)})
	steps = append(steps, term)
	out.peak = max(out.peak, e.lastHWM.Load())
	out.text = strings.Join(steps, "; ")
	if exit.Killed || exit.Code != 0 {
		out.issues = append(out.issues, "koe did not stop cleanly at SIGTERM during an upload: "+describeExit(exit))
	}
	return out
}

// oneWord is n random letters without a space: a word no tokenizer has
// seen whole, none of whose stretches repeats (a tokenizer's cache of
// counts would make a repeated letter cheap).
func oneWord(n int) []byte {
	rng := rand.New(rand.NewPCG(25, 9))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + rng.IntN(26))
	}
	return b
}

// uploadResult is what one upload cost koe and how it was answered.
type uploadResult struct {
	file         string
	size         int
	status       int // 0: no answer
	answer       string
	took, cpu    time.Duration
	peak         int64 // KiB
	peakIsGlobal bool
}

func (r uploadResult) String() string {
	answer := fmt.Sprintf("%d %q", r.status, clip(r.answer, 90))
	if r.status == 0 {
		answer = "NO ANSWER (" + clip(r.answer, 60) + ")"
	}
	peak := mib(r.peak)
	if r.peakIsGlobal {
		peak += " (since start)"
	}
	cpu := fmt.Sprintf("%.1f s", r.cpu.Seconds())
	if r.cpu < 0 {
		cpu = "-" // koe is gone: its CPU time with it
	}
	return fmt.Sprintf("%s (%.1f MB): %s in %.1f s, koe CPU %s, peak %s",
		r.file, float64(r.size)/1e6, answer, r.took.Seconds(), cpu, peak)
}

// measureUpload sends f and waits for the answer within limit.
func (e *env) measureUpload(ctx context.Context, f hostileFile, limit time.Duration) uploadResult {
	r := uploadResult{file: f.name, size: len(f.data)}
	r.peakIsGlobal = loadrun.ResetPeak(e.koe.PID) != nil
	before := loadrun.ReadUsage(e.koe.PID)
	uctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start := time.Now()
	r.status, r.answer = upload(uctx, e.koe.Addr(), f)
	r.took = time.Since(start)
	after := loadrun.ReadUsage(e.koe.PID)
	r.cpu, r.peak = after.CPU-before.CPU, after.HWM
	return r
}

// leaveUpload sends f and leaves after uploadLeaveAfter, then watches how
// much CPU koe spends in the uploadWatch after.
func (e *env) leaveUpload(ctx context.Context, f hostileFile) string {
	r := e.measureUpload(ctx, f, uploadLeaveAfter)
	if r.status != 0 {
		return "leaving: " + r.String() + " (answered before the uploader left)"
	}
	before := loadrun.ReadUsage(e.koe.PID)
	select {
	case <-time.After(uploadWatch):
	case <-ctx.Done():
	}
	after := loadrun.ReadUsage(e.koe.PID)
	return fmt.Sprintf("leaving: %s left after %.0f s; koe's CPU in the %.0f s after: %.1f s",
		f.name, uploadLeaveAfter.Seconds(), uploadWatch.Seconds(), (after.CPU - before.CPU).Seconds())
}

// termDuringUpload sends f and stops koe with SIGTERM uploadTermAfter
// later: what the uploader hears and how koe ends.
func (e *env) termDuringUpload(ctx context.Context, f hostileFile) (string, loadrun.Exit) {
	type answer struct {
		status int
		text   string
	}
	answers := make(chan answer, 1)
	uctx, cancel := context.WithTimeout(ctx, uploadTimeout)
	defer cancel()
	go func() {
		status, text := upload(uctx, e.koe.Addr(), f)
		answers <- answer{status, text}
	}()
	var exit loadrun.Exit
	select {
	case a := <-answers:
		exit = e.koe.Stop(stopGrace)
		return fmt.Sprintf("SIGTERM: %s answered %d before the signal; koe: %s", f.name, a.status, describeExit(exit)), exit
	case <-time.After(uploadTermAfter):
	}
	exit = e.koe.Stop(stopGrace)
	a := <-answers
	heard := fmt.Sprintf("%d %q", a.status, clip(a.text, 90))
	if a.status == 0 {
		heard = "no answer (" + clip(a.text, 60) + ")"
	}
	return fmt.Sprintf("SIGTERM %.0f s into %s: the uploader heard %s; koe: %s", uploadTermAfter.Seconds(), f.name, heard, describeExit(exit)), exit
}

// upload posts f as a document of the default character: the status and
// the answer's error (0 and why, when there is no answer).
func upload(ctx context.Context, addr string, f hostileFile) (int, string) {
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	part, err := w.CreateFormFile("file", f.name)
	if err != nil {
		return 0, err.Error()
	}
	_, _ = part.Write(f.data)
	_ = w.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/api/characters/"+uploadCharacter+"/documents", &body)
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	// A connection of its own, closed when ctx ends: that is how the
	// uploader leaves.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, "gave up waiting"
		}
		return 0, err.Error()
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var a struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(data, &a) != nil || a.Error == "" {
		return resp.StatusCode, strings.TrimSpace(string(data[:min(len(data), 200)]))
	}
	return resp.StatusCode, a.Error
}

// structureTimeout bounds the wait for the answer to a PDF whose
// structure a reader without checks loops on.
const structureTimeout = 15 * time.Second

func pdfStructureScenario() scenario {
	return scenario{
		name: "pdf-struct",
		about: "PDFs of a few hundred bytes whose structure holds one number a reader should not trust: " +
			"an object stream of 10^12 objects, one said to be in itself, a cross-reference table that starts at object 10^12",
		figure:     "files answered",
		format:     "%.0f",
		watchesKoe: true,
		run:        runPDFStructure,
	}
}

func runPDFStructure(ctx context.Context, e *env) outcome {
	out := outcome{value: 0}
	files := []hostileFile{
		{"objstm.pdf", pdftest.ObjectStream("/N 1000000000000", 7)},
		{"itself.pdf", pdftest.ObjectStreamInItself()},
		{"xref.pdf", pdftest.ClassicXref("1000000000000 1\n0000000000 00000 n \n")},
	}
	var steps []string
	for _, f := range files {
		r := e.measureUpload(ctx, f, structureTimeout)
		out.peak = max(out.peak, r.peak)
		step := r.String()
		if r.status != 0 {
			out.value++
		} else {
			// A connection that broke may be koe dying: give it a moment.
			select {
			case <-e.koe.Exited():
			case <-time.After(2 * time.Second):
			}
		}
		if !e.koe.Running() {
			out.noKoe = true
			steps = append(steps, step+"; koe is gone: "+e.koe.ExitStatus())
			break
		}
		steps = append(steps, step)
	}
	out.text = strings.Join(steps, "; ")
	return out
}
