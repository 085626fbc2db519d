package controlplane

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// RootModule is the module path of the repository's root module, whose
// go.mod marks the repository's root for [RepoRoot].
const RootModule = "github.com/numaplace/numaplace"

// RepoRoot returns the repository's root directory ([FindRepoRoot]), or
// fails the test saying how to name it.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// FindRepoRoot returns the repository's root directory: $NUMAPLACE_REPO
// when it is set, otherwise the nearest directory at or above the working
// directory whose go.mod declares module [RootModule] (go test runs a
// package's tests in the package's directory, which lies inside the
// repository). It is [RepoRoot] for code without a testing.TB, such as a
// goroutine's.
func FindRepoRoot() (string, error) {
	if dir := os.Getenv("NUMAPLACE_REPO"); dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", fmt.Errorf("NUMAPLACE_REPO=%q: %w", dir, err)
		}
		return abs, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("the working directory: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if declaresModule(filepath.Join(dir, "go.mod"), RootModule) {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no directory at or above %s has a go.mod declaring module %s; set NUMAPLACE_REPO to the repository's root", wd, RootModule)
		}
	}
}

// RepoPath returns the path of a file of the repository, given by its
// path elements below [RepoRoot]: RepoPath(t, "deploy", "agent.yaml").
func RepoPath(t testing.TB, elem ...string) string {
	t.Helper()
	return filepath.Join(append([]string{RepoRoot(t)}, elem...)...)
}

// declaresModule reports whether the go.mod file at path declares module
// mod (false when it cannot be read).
func declaresModule(path, mod string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if name, ok := strings.CutPrefix(line, "module "); ok {
			return strings.Trim(strings.TrimSpace(name), `"`) == mod
		}
	}
	return false
}
