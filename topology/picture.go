package topology

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/numaplace/numaplace/numa"
)

// PictureWidth is the widest line, in characters, that [Machine.Picture]
// writes.
const PictureWidth = 100

// Characters [Machine.Picture] uses by convention.
const (
	// MarkFree is shown for a CPU or GPU without a mark.
	MarkFree = '.'
	// MarkReserved is shown for a reserved CPU without a mark.
	MarkReserved = 'r'
	// MarkUnhealthy is the character callers should use for a GPU marked
	// unhealthy (Picture does not know GPU health; pass it in Marks.GPUs).
	MarkUnhealthy = 'x'
)

// Marks are the optional characters of a [Machine.Picture], such as the
// allocations of a machine's state.
//
// Conventions: '.' ([MarkFree]) is a free CPU or GPU; 'r' ([MarkReserved])
// is shown for a reserved CPU that has no mark; callers mark the CPUs and
// GPUs of an allocation with one letter per allocation ('a', 'b', ...) and
// an unhealthy GPU with 'x' ([MarkUnhealthy]), and explain their letters in
// Legend. An explicit mark wins over 'r'. Marks must be printable characters
// one column wide; marks of CPUs or GPUs the machine does not have are
// ignored.
type Marks struct {
	// CPUs maps a logical CPU to its character.
	CPUs map[int]rune
	// GPUs maps a GPU ID to its character.
	GPUs map[int]rune
	// Legend lines are printed under the key, such as "a = pod a: 4 GPUs,
	// 24 CPUs" (a long line is wrapped at spaces).
	Legend []string
}

// Picture writes a text picture of the machine to w: a summary line and a
// key (with the marks' legend); then, socket by socket, each NUMA node with
// its ID, memory and CPU list, its cores as a grid of one character per
// logical CPU grouped by core ("[ab][..]", a core's CPUs in ascending
// order, each line labelled with the CPUs it shows, siblings included), and its GPUs and other devices grouped
// under their PCIe switch (GPUs with their mark and bus ID); nodes of
// unknown socket after the sockets (a GPU's memory node says whose, a
// placeholder without CPUs or memory that holds no device is listed on one
// "NUMA placeholders" line instead); GPUs and devices of unknown NUMA node in
// a section of their own; NVLinks; the NUMA sets; and the distance table
// (in full up to 16 nodes, else one line per node grouping the other nodes
// by distance). Node numbers are IDs, not dense indices.
//
// marks may be nil. Every line fits in [PictureWidth] columns (long lists
// are wrapped), and the output depends only on the machine and the marks.
// The only errors are a mark that is not a printable character and the
// writer's.
func (m *Machine) Picture(w io.Writer, marks *Marks) error {
	if m == nil {
		return errNilMachine
	}
	if w == nil {
		return fmt.Errorf("%w: Picture needs an io.Writer, got nil", ErrInvalid)
	}
	if marks == nil {
		marks = &Marks{}
	}
	if err := checkMarks(marks); err != nil {
		return err
	}
	p := &painter{m: m, marks: marks}
	p.layout()
	p.header()
	p.sockets()
	p.unknownNode()
	p.nvlinks()
	p.sets()
	p.distances()
	_, err := io.WriteString(w, p.sb.String())
	return err
}

func checkMarks(marks *Marks) error {
	check := func(kind string, mk map[int]rune) error {
		for _, id := range slices.Sorted(maps.Keys(mk)) { // the lowest bad ID, always
			r := mk[id]
			if !unicode.IsPrint(r) || r == ' ' || r == utf8.RuneError {
				return fmt.Errorf("topology: picture mark %q of %s %d is not a printable character", r, kind, id)
			}
		}
		return nil
	}
	if err := check("CPU", marks.CPUs); err != nil {
		return err
	}
	return check("GPU", marks.GPUs)
}

type painter struct {
	m      *Machine
	marks  *Marks
	sb     strings.Builder
	lines  [][][]int // per dense node: the grid's lines of core indices
	labelW int       // width of the grid's line labels, machine-wide
	nameW  int       // width of the GPU and device names, machine-wide
}

// layout decides, for the whole machine so that columns line up from node to
// node, how the core grids are cut into lines and how wide the labels are.
func (p *painter) layout() {
	m := p.m
	cores := make([][]int, len(m.nodes))
	for ci, c := range m.cores {
		cores[c.NodeIndex] = append(cores[c.NodeIndex], ci)
	}
	p.lines = make([][][]int, len(m.nodes))
	split := func() (labelW int) {
		for i := range m.nodes {
			p.lines[i] = p.splitCores(cores[i], PictureWidth-len(gridIndent)-p.labelW-1)
			for _, l := range p.lines[i] {
				labelW = max(labelW, len(p.gridLabel(l)))
			}
		}
		return min(labelW, maxLabel)
	}
	// Fewer cores a line give shorter labels: widen the label column until
	// the labels fit (labels still too long are shortened when drawn).
	converged := false
	for range 4 {
		w := split()
		if w <= p.labelW {
			converged = true
			break
		}
		p.labelW = w
	}
	if !converged {
		split()
	}
	for _, g := range m.gpus {
		p.nameW = max(p.nameW, utf8.RuneCountInString(gpuName(g, 'x')))
	}
	for _, d := range m.devices {
		p.nameW = max(p.nameW, utf8.RuneCountInString(devName(d)))
	}
	p.nameW = min(p.nameW, 40)
}

func gpuName(g GPU, mark rune) string { return fmt.Sprintf("[%c] GPU %d", mark, g.ID) }

func devName(d Device) string { return fmt.Sprintf("    %s %s", d.Class, d.ID) }

// line writes one line, hard-wrapping it (continuation indented by four
// more spaces than the line) if it is still too long. Callers wrap lists
// themselves at sensible points; this is the last resort that keeps the
// width promise for arbitrary names from JSON.
func (p *painter) line(s string) {
	indent := len(s) - len(strings.TrimLeft(s, " "))
	cont := strings.Repeat(" ", min(indent+4, PictureWidth/2))
	for utf8.RuneCountInString(s) > PictureWidth {
		cut := byteIndexOfRune(s, PictureWidth)
		p.sb.WriteString(s[:cut])
		p.sb.WriteByte('\n')
		s = cont + s[cut:]
	}
	p.sb.WriteString(s)
	p.sb.WriteByte('\n')
}

// byteIndexOfRune returns the byte offset of the n-th rune of s.
func byteIndexOfRune(s string, n int) int {
	i := 0
	for off := range s {
		if i == n {
			return off
		}
		i++
	}
	return len(s)
}

// wrap writes prefix followed by items joined with sep, starting a new line
// (indented by cont) before an item that would pass the width.
func (p *painter) wrap(prefix, cont string, items []string, sep string) {
	var cur strings.Builder
	cur.WriteString(prefix)
	n := utf8.RuneCountInString(prefix)
	fresh := true
	for i, it := range items {
		piece := it
		if i < len(items)-1 {
			piece += sep
		}
		w := utf8.RuneCountInString(strings.TrimRight(piece, " "))
		if !fresh && n+w > PictureWidth {
			p.line(strings.TrimRight(cur.String(), " "))
			cur.Reset()
			cur.WriteString(cont)
			n = utf8.RuneCountInString(cont)
		}
		cur.WriteString(piece)
		n += utf8.RuneCountInString(piece)
		fresh = false
	}
	p.line(strings.TrimRight(cur.String(), " "))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func (p *painter) header() {
	m := p.m
	name := m.name
	if name == "" {
		name = "machine"
	}
	parts := []string{}
	if len(m.sockets) > 0 {
		parts = append(parts, plural(len(m.sockets), "socket", "sockets"))
	}
	nodes := plural(len(m.nodes), "NUMA node", "NUMA nodes")
	if gm, ph := m.kinds[NodeGPUMemory].Count(), m.kinds[NodePlaceholder].Count(); gm+ph > 0 {
		nodes += fmt.Sprintf(" (%d with CPUs", m.kinds[NodeCPU].Count())
		if pm := m.kinds[NodeMemory].Count(); pm > 0 {
			nodes += fmt.Sprintf(", %d of plain memory", pm)
		}
		if gm > 0 {
			nodes += fmt.Sprintf(", %d of GPU memory", gm)
		}
		if ph > 0 {
			nodes += ", " + plural(ph, "placeholder", "placeholders")
		}
		nodes += ")"
	}
	parts = append(parts, nodes,
		fmt.Sprintf("%s on %s", plural(m.NumCPUs(), "CPU", "CPUs"), plural(len(m.cores), "core", "cores")))
	if r := m.reserved.Size(); r > 0 {
		parts = append(parts, fmt.Sprintf("%d reserved", r))
	}
	parts = append(parts, plural(len(m.gpus), "GPU", "GPUs"))
	var classes []string
	count := map[string]int{}
	for _, d := range m.devices {
		if count[d.Class] == 0 {
			classes = append(classes, d.Class)
		}
		count[d.Class]++
	}
	for _, c := range classes {
		parts = append(parts, fmt.Sprintf("%d %s", count[c], c))
	}
	p.wrap(name+": ", "  ", parts, ", ")
	p.line(fmt.Sprintf("key: [%s] one core, a character per CPU: %c free, %c reserved; [%c] GPU n, %c free",
		strings.Repeat(string(MarkFree), max(m.threads, 1)), MarkFree, MarkReserved, MarkFree, MarkFree))
	for _, l := range p.marks.Legend {
		p.wrap("  ", "    ", strings.Fields(l), " ")
	}
}

// memory formats MiB as GiB when it is a whole number of GiB.
func memory(mib int64) string {
	if mib >= 1024 && mib%1024 == 0 {
		return strconv.FormatInt(mib/1024, 10) + " GiB"
	}
	return strconv.FormatInt(mib, 10) + " MiB"
}

// idList formats node IDs as a list with ranges ("0-3,8").
func idList(ids []numa.NodeID) string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	var parts []string
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", ids[i], ids[j]))
		} else {
			parts = append(parts, ids[i].String())
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

func (p *painter) sockets() {
	m := p.m
	bare := p.barePlaceholders()
	unknown := false
	for i, n := range m.nodes {
		unknown = unknown || n.Socket == UnknownSocket && !bare.Contains(i)
	}
	for _, s := range m.sockets {
		p.line("socket " + strconv.Itoa(s))
		for i, n := range m.nodes {
			if n.Socket == s && !bare.Contains(i) {
				p.node(i)
			}
		}
	}
	if unknown {
		if len(m.sockets) > 0 {
			p.line("NUMA nodes of unknown socket")
		} else {
			p.line("NUMA nodes (no socket information)")
		}
		for i, n := range m.nodes {
			if n.Socket == UnknownSocket && !bare.Contains(i) {
				p.node(i)
			}
		}
	}
	if bare != 0 {
		p.wrap("NUMA placeholders (no CPUs, no memory): ", "  ", strings.Split(idList(m.IDsOf(bare)), ","), ",")
	}
}

// barePlaceholders returns the placeholder nodes without a GPU or device:
// the picture lists them on one line instead of node by node.
func (p *painter) barePlaceholders() numa.Mask {
	m := p.m
	bare := m.kinds[NodePlaceholder]
	for _, g := range m.gpus {
		if i, ok := m.NodeIndex(g.NUMANode); ok {
			bare = bare.Without(i)
		}
	}
	for _, d := range m.devices {
		if i, ok := m.NodeIndex(d.NUMANode); ok {
			bare = bare.Without(i)
		}
	}
	return bare
}

func (p *painter) node(i int) {
	m := p.m
	n := m.nodes[i]
	head := fmt.Sprintf("  node %d: %s", n.ID, memory(n.MemoryMiB))
	switch {
	case n.GPUMemory:
		p.line(head + fmt.Sprintf(", no CPUs: GPU %d's memory (not pod memory)", n.GPU))
	case n.CPUs.IsEmpty() && n.MemoryMiB == 0:
		p.line(head + ", no CPUs, no memory (placeholder)")
	case n.CPUs.IsEmpty():
		p.line(head + ", no CPUs (memory only)")
	default:
		cores := 0
		for _, l := range p.lines[i] {
			cores += len(l)
		}
		head += fmt.Sprintf(", %s, CPUs ", plural(cores, "core", "cores"))
		p.wrap(head, "      ", strings.Split(n.CPUs.String(), ","), ",")
		p.grid(i)
	}
	var gpus []GPU
	for _, g := range m.gpus {
		if g.NUMANode == n.ID {
			gpus = append(gpus, g)
		}
	}
	var devs []Device
	for _, d := range m.devices {
		if d.NUMANode == n.ID {
			devs = append(devs, d)
		}
	}
	p.pci("    ", gpus, devs)
}

const (
	gridIndent = "    "
	maxLabel   = 32
)

// grid draws the cores of the node at dense index i as lines of "[..]"
// groups, each line labelled with the CPUs it shows.
func (p *painter) grid(i int) {
	for _, l := range p.lines[i] {
		label := p.gridLabel(l)
		if len(label) > p.labelW {
			label = label[:max(p.labelW-2, 0)] + ".."
		}
		var sb strings.Builder
		sb.WriteString(gridIndent)
		sb.WriteString(label)
		sb.WriteString(strings.Repeat(" ", max(p.labelW-len(label), 0)+1))
		for _, ci := range l {
			sb.WriteByte('[')
			for cpu := range p.m.cores[ci].CPUs.All() {
				sb.WriteRune(p.cpuMark(cpu))
			}
			sb.WriteByte(']')
		}
		p.line(sb.String())
	}
}

// splitCores cuts cores into lines of at most width characters (at least
// one core a line); no core, no line.
func (p *painter) splitCores(cores []int, width int) [][]int {
	if len(cores) == 0 {
		return nil
	}
	var lines [][]int
	var cur []int
	n := 0
	for _, ci := range cores {
		w := p.m.cores[ci].CPUs.Size() + 2
		if len(cur) > 0 && n+w > width {
			lines = append(lines, cur)
			cur, n = nil, 0
		}
		cur = append(cur, ci)
		n += w
	}
	return append(lines, cur)
}

func (p *painter) gridLabel(cores []int) string {
	var s numa.CPUSet
	for _, ci := range cores {
		s.UnionWith(p.m.cores[ci].CPUs)
	}
	return s.String()
}

func (p *painter) cpuMark(cpu int) rune {
	if r, ok := p.marks.CPUs[cpu]; ok {
		return r
	}
	if p.m.reserved.Contains(cpu) {
		return MarkReserved
	}
	return MarkFree
}

func (p *painter) gpuMark(id int) rune {
	if r, ok := p.marks.GPUs[id]; ok {
		return r
	}
	return MarkFree
}

// pci lists GPUs and devices grouped by PCIe switch: switches in the order
// of their first GPU (then of their first device), items without a switch
// last.
func (p *painter) pci(indent string, gpus []GPU, devs []Device) {
	if len(gpus) == 0 && len(devs) == 0 {
		return
	}
	type item struct{ name, bus string }
	var order []string
	groups := map[string][]item{}
	add := func(sw string, it item) {
		if _, ok := groups[sw]; !ok && sw != "" {
			order = append(order, sw)
		}
		groups[sw] = append(groups[sw], it)
	}
	for _, g := range gpus {
		add(g.PCIeSwitch, item{gpuName(g, p.gpuMark(g.ID)), g.BusID})
	}
	for _, d := range devs {
		add(d.PCIeSwitch, item{devName(d), d.BusID})
	}
	if _, ok := groups[""]; ok {
		order = append(order, "")
	}
	for _, sw := range order {
		if sw == "" {
			p.line(indent + "no PCIe switch")
		} else {
			p.line(indent + "PCIe switch " + sw)
		}
		for _, it := range groups[sw] {
			s := indent + "  " + it.name
			if it.bus != "" {
				s += strings.Repeat(" ", max(p.nameW-utf8.RuneCountInString(it.name), 0)+2) + it.bus
			}
			p.line(s)
		}
	}
}

func (p *painter) unknownNode() {
	var gpus []GPU
	for _, g := range p.m.gpus {
		if g.NUMANode == UnknownNode {
			gpus = append(gpus, g)
		}
	}
	var devs []Device
	for _, d := range p.m.devices {
		if d.NUMANode == UnknownNode {
			devs = append(devs, d)
		}
	}
	if len(gpus) == 0 && len(devs) == 0 {
		return
	}
	p.line("GPUs and devices of unknown NUMA node")
	p.pci("  ", gpus, devs)
}

func (p *painter) nvlinks() {
	m := p.m
	if len(m.nvlinks) == 0 {
		return
	}
	n := len(m.gpus)
	all := len(m.nvlinks) == n*(n-1)/2
	for _, l := range m.nvlinks {
		all = all && l.Links == m.nvlinks[0].Links
	}
	if all {
		ids := make([]numa.NodeID, n) // idList formats any ints with ranges
		for i, g := range m.gpus {
			ids[i] = numa.NodeID(g.ID)
		}
		p.line(fmt.Sprintf("NVLink: every pair of GPUs %s, %d links each", idList(ids), m.nvlinks[0].Links))
		return
	}
	items := make([]string, len(m.nvlinks))
	for i, l := range m.nvlinks {
		items[i] = fmt.Sprintf("%d-%d x%d", l.A, l.B, l.Links)
	}
	p.wrap("NVLink (GPU pair x links): ", "  ", items, ", ")
}

func (p *painter) sets() {
	items := make([]string, len(p.m.sets))
	for i, s := range p.m.sets {
		items[i] = "{" + idList(p.m.IDsOf(s)) + "}"
	}
	p.wrap("NUMA sets: ", "  ", items, " ")
}

func (p *painter) distances() {
	m := p.m
	n := len(m.nodes)
	colW := 4
	for _, nd := range m.nodes {
		colW = max(colW, len(nd.ID.String())+1)
	}
	if n <= 16 && 6+n*colW <= PictureWidth {
		p.line("distances")
		var sb strings.Builder
		sb.WriteString("  node")
		for _, nd := range m.nodes {
			fmt.Fprintf(&sb, "%*d", colW, nd.ID)
		}
		p.line(sb.String())
		for i, nd := range m.nodes {
			sb.Reset()
			fmt.Fprintf(&sb, "%6d", nd.ID)
			for j := range m.nodes {
				fmt.Fprintf(&sb, "%*d", colW, m.distances.At(i, j))
			}
			p.line(sb.String())
		}
		return
	}
	p.line("distances (each node: distance to itself, then to the other nodes by distance)")
	for i, nd := range m.nodes {
		byDist := map[int][]numa.NodeID{}
		var dists []int
		for j, o := range m.nodes {
			if j == i {
				continue
			}
			d := m.distances.At(i, j)
			if _, ok := byDist[d]; !ok {
				dists = append(dists, d)
			}
			byDist[d] = append(byDist[d], o.ID)
		}
		slices.Sort(dists)
		items := []string{fmt.Sprintf("%d self", m.distances.At(i, i))}
		for _, d := range dists {
			items = append(items, fmt.Sprintf("%d to %s", d, idList(byDist[d])))
		}
		p.wrap(fmt.Sprintf("  node %d: ", nd.ID), "      ", items, ", ")
	}
}
