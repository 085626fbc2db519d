package allocatortest_test

import (
	"go/parser"
	"go/token"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/allocator/allocatortest"
)

// TestPackageDocListsEveryCriterion: the allocator's package doc, the
// statement of the preference order that godoc shows, has one numbered
// item per criterion of the order, as many as the doc comment of the
// ranking type lists (TestCriteriaFollowTheRankDocComment ties that list
// to the model's).
func TestPackageDocListsEveryCriterion(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	require.NoError(t, err)
	require.NotNil(t, f.Doc, "allocator/doc.go has no package doc")
	items := regexp.MustCompile(`(?m)^\s*(\d+)\. `).FindAllStringSubmatch(f.Doc.Text(), -1)
	var nums []string
	for _, m := range items {
		nums = append(nums, m[1])
	}
	var want []string
	for i := range allocatortest.Criteria {
		want = append(want, string(rune('1'+i)))
	}
	require.Equal(t, want, nums, "the package doc's numbered list of criteria")
}
