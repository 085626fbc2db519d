// Package cover answers the covering questions of package allocator's
// decisions: given a [Problem] (for each demanded resource kind and NUMA
// node an amount, and the demand of each kind), a pool of nodes and a
// width w, which w nodes of the pool together cover every demand, each
// node counting at most the demand of each kind; and what is the fewest
// nodes of a pool that do.
//
// A decision gives a [Search] (the strategies' working memory) its step
// [Bound] with [Search.Begin], then asks [Search.Exists] (some cover of
// width w), [Search.MinWidth] (the narrowest cover) and [Search.Each]
// (every cover of a small pool, in lexicographic order). The strategy is
// chosen in Exists: the nodes that cover alone for width 1
// ([Problem.OneNode]); an exact depth-first search over the subsets of the
// width on pools of at most [SmallPool] nodes; on larger pools a search
// over classes of nodes with equal amounts, exact within [SearchSteps]
// steps per decision (1,024 for a soft bound, see [Bound]), with
// greedy covers, per-kind and Lagrangian bounds first. Every answer is a
// deterministic function of the problem, the pool and the width (and of
// the bound's steps already used): ties go to the lower node indices.
//
// The package also holds the sorts and selections those searches use and
// allocator shares: [SortDesc], [SortAscendingDesc], [SelectLargest] and
// [SumLargest]. The test-only switch of package
// allocator/internal/general routes its shortcuts (identical nodes
// answered by arithmetic, the per-kind bound judged before the class
// search is prepared) to the general path.
//
// A Search is used by one decision at a time; the class search's table of
// top sums, made for long searches, stays in it for the next decisions.
package cover
