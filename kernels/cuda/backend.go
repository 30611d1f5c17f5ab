//go:build cuda

package cuda

/*
#cgo CFLAGS: -O2 -I/usr/local/cuda/include
#cgo LDFLAGS: -L/usr/local/cuda/lib64/stubs -lcuda
#include <stdlib.h>
#include "driver.h"
*/
import "C"

import (
	_ "embed"
	"fmt"
	"math"
	"sort"
	"unsafe"
	"weak"

	"sancus/kernels"
	"sancus/kernels/matrix"
)

//go:embed sancus.ptx
var ptx string

// Opener is Open as a kernels.Opener, for kernels.Use(kernels.DeviceCUDA,
// cuda.Opener).
func Opener(localRank int) (kernels.Backend, error) { return Open(localRank) }

// tnChunk is the row slice of the split-K weight gradient (as on the CPU).
const tnChunk = 4096

// buf is one device allocation.
type buf struct {
	p     C.scg_ptr
	bytes int
}

type devCSR struct {
	rowptr, col, val *buf
	rows, cols       int
	nnz              int64
}

// Backend runs kernels on one GPU: device memory holds every matrix made
// by NewDense or Mirror, the Â blocks (uploaded once) and the layer-1
// input. Host matrices (weights, biases) are uploaded when used.
type Backend struct {
	g       *C.scg
	device  string
	ordinal int
	mem     int64
	err     error
	gat     bool // the module holds every attention kernel (hasGAT)

	all     []*buf
	staged  map[*matrix.Dense]*buf
	csrs    map[weak.Pointer[matrix.CSR]]*devCSR
	ids     map[weak.Pointer[int64]]*listCopy[int64] // dropout ids
	i32s    map[weak.Pointer[int32]]*listCopy[int32] // labels and row lists
	inputs  map[weak.Pointer[input]]*owned
	loss    *buf // per-row losses
	vec     *buf // bias uploads
	scales  *buf // row scales (ScaleRows)
	slab    *buf // split-K partial products
	partial *buf // column sums and norms
}

// DeviceCount is the number of CUDA devices (0 with an error when the
// driver is missing).
func DeviceCount() (int, error) {
	var n C.int
	if r := C.scg_device_count(&n); r != 0 {
		return 0, cudaError("cuInit", r)
	}
	return int(n), nil
}

// Open makes a backend on device localRank modulo the devices present.
func Open(localRank int) (*Backend, error) {
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("cuda: no device found")
	}
	b := &Backend{ordinal: localRank % n, staged: map[*matrix.Dense]*buf{}, csrs: map[weak.Pointer[matrix.CSR]]*devCSR{},
		ids: map[weak.Pointer[int64]]*listCopy[int64]{}, i32s: map[weak.Pointer[int32]]*listCopy[int32]{},
		inputs: map[weak.Pointer[input]]*owned{}}
	b.g = (*C.scg)(C.calloc(1, C.size_t(unsafe.Sizeof(C.scg{}))))
	src := C.CString(ptx)
	defer C.free(unsafe.Pointer(src))
	var name [256]C.char
	var total C.size_t
	if r := C.scg_open(b.g, C.int(b.ordinal), src, &name[0], C.int(len(name)), &total); r != 0 {
		C.free(unsafe.Pointer(b.g))
		return nil, fmt.Errorf("cuda: opening device %d: %w", b.ordinal, cudaError("setup", r))
	}
	b.device, b.mem = C.GoString(&name[0]), int64(total)
	b.gat = b.hasGAT()
	return b, nil
}

func cudaError(what string, r C.int) error {
	return fmt.Errorf("%s: %s (CUresult %d)", what, C.GoString(C.scg_error(r)), int(r))
}

// ok records the first failure; CUDA errors are sticky, so later calls
// only keep the first report.
func (b *Backend) ok(r C.int, what string) bool {
	if r != 0 && b.err == nil {
		b.err = fmt.Errorf("cuda device %d (%s): %w", b.ordinal, b.device, cudaError(what, r))
		b.g.failed = 1
	}
	return r == 0
}

func (b *Backend) fail(format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("cuda: "+format, args...)
		b.g.failed = 1
	}
}

// Name is "cuda".
func (b *Backend) Name() string { return "cuda" }

// Device describes the GPU in use.
func (b *Backend) Device() string {
	return fmt.Sprintf("%s (device %d, %.0f GiB)", b.device, b.ordinal, float64(b.mem)/(1<<30))
}

// Err is the first device error.
func (b *Backend) Err() error { return b.err }

// Sync waits for the queued work (for timing).
func (b *Backend) Sync() error {
	b.ok(C.scg_sync(b.g), "synchronize")
	return b.err
}

// Close frees every allocation and the stream.
func (b *Backend) Close() error {
	if b.g == nil {
		return b.err
	}
	for _, x := range b.all {
		C.scg_free(b.g, x.p)
	}
	b.all = nil
	b.ok(C.scg_close(b.g), "close")
	C.free(unsafe.Pointer(b.g))
	b.g = nil
	return b.err
}

func (b *Backend) alloc(bytes int) *buf {
	x := &buf{bytes: bytes}
	if b.ok(C.scg_alloc(b.g, &x.p, C.size_t(bytes)), fmt.Sprintf("allocating %d bytes", bytes)) {
		b.all = append(b.all, x)
	}
	return x
}

// grow makes *x hold at least bytes (scratch buffers).
func (b *Backend) grow(x **buf, bytes int) *buf {
	if *x == nil || (*x).bytes < bytes {
		*x = b.alloc(bytes)
	}
	return *x
}

func (b *Backend) upload(dst *buf, src unsafe.Pointer, bytes int) {
	if bytes > 0 {
		b.ok(C.scg_upload(b.g, dst.p, src, C.size_t(bytes)), "upload")
	}
}

func f32(s []float32) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

// NewDense allocates a zeroed matrix on the device with a host side.
func (b *Backend) NewDense(rows, cols int) *matrix.Dense {
	return b.Mirror(make([]float32, rows*cols), rows, cols)
}

// Mirror allocates the device side of a host block (zeroed).
func (b *Backend) Mirror(data []float32, rows, cols int) *matrix.Dense {
	x := b.alloc(rows * cols * 4)
	b.ok(C.scg_zero(b.g, x.p, C.size_t(rows*cols)), "zero")
	return &matrix.Dense{Rows: rows, Cols: cols, Data: data, Dev: x}
}

func devBuf(d *matrix.Dense) *buf {
	x, _ := d.Dev.(*buf)
	return x
}

// in is a matrix to read: its device side, or its host values uploaded now.
func (b *Backend) in(d *matrix.Dense) C.scg_ptr {
	if x := devBuf(d); x != nil {
		return x.p
	}
	n := d.Rows * d.Cols
	x := b.staged[d]
	b.grow(&x, n*4)
	b.staged[d] = x
	b.upload(x, f32(d.Data), n*4)
	return x.p
}

// out is a matrix to write: it must live on the device.
func (b *Backend) out(d *matrix.Dense) C.scg_ptr {
	if x := devBuf(d); x != nil {
		return x.p
	}
	b.fail("a %dx%d result matrix is not on the device (make it with NewDense)", d.Rows, d.Cols)
	return 0
}

// Upload copies Data to the device side.
func (b *Backend) Upload(d *matrix.Dense) {
	if x := devBuf(d); x != nil {
		b.upload(x, f32(d.Data), d.Rows*d.Cols*4)
	}
}

// Download copies the device side to Data.
func (b *Backend) Download(d *matrix.Dense) {
	if x := devBuf(d); x != nil && d.Rows*d.Cols > 0 {
		b.ok(C.scg_download(b.g, f32(d.Data), x.p, C.size_t(d.Rows*d.Cols*4)), "download")
	}
}

// Copy sets dst = src on the device.
func (b *Backend) Copy(dst, src *matrix.Dense) {
	n := min(dst.Rows*dst.Cols, src.Rows*src.Cols)
	b.ok(C.scg_copy(b.g, b.out(dst), b.in(src), C.size_t(n*4)), "copy")
}

// Zero clears d on the device.
func (b *Backend) Zero(d *matrix.Dense) {
	b.ok(C.scg_zero(b.g, b.out(d), C.size_t(d.Rows*d.Cols)), "zero")
}

// wideRow is the mean row length above which a row gets a whole block.
const wideRow = 256

func (b *Backend) spmm(d *devCSR, val C.scg_ptr, x, c C.scg_ptr, n int, acc bool) {
	if n <= 128 && d.rows > 0 && d.nnz/int64(d.rows) >= wideRow {
		b.ok(C.scg_spmm_wide(b.g, d.rowptr.p, d.col.p, val, x, c, C.longlong(d.rows), C.int(n), cbool(acc)), "spmm (long rows)")
		return
	}
	if n%4 == 0 && b.has(C.SCG_SPMM4) && (x|c)%16 == 0 {
		b.ok(C.scg_spmm4(b.g, d.rowptr.p, d.col.p, val, x, c, C.longlong(d.rows), C.int(n), cbool(acc)), "spmm")
		return
	}
	b.ok(C.scg_spmm(b.g, d.rowptr.p, d.col.p, val, x, c, C.longlong(d.rows), C.int(n), cbool(acc)), "spmm")
}

// has reports whether the module holds optional kernel k (an older PTX
// may not): without it the operation runs on host copies.
func (b *Backend) has(k C.int) bool { return C.scg_has(b.g, k) != 0 }

// optional names the kernels a module may lack, by their driver.h index.
var optional = map[C.int]string{C.SCG_SPMM4: "sc_spmm4", C.SCG_ELU: "sc_elu", C.SCG_ELU_BWD: "sc_elu_backward",
	C.SCG_ADD: "sc_add", C.SCG_SCALE_ROWS: "sc_scale_rows", C.SCG_GEMM64: "sc_gemm64",
	C.SCG_GAT_PAYLOAD: "sc_gat_payload", C.SCG_GAT_START: "sc_gat_start", C.SCG_GAT_MAX: "sc_gat_max",
	C.SCG_GAT_ATTEND: "sc_gat_attend", C.SCG_GAT_NORM: "sc_gat_norm", C.SCG_GAT_MEAN: "sc_gat_mean",
	C.SCG_GAT_GRAD_ROWS: "sc_gat_grad_rows", C.SCG_GAT_NEIGHBOUR_U: "sc_gat_neighbour_u",
	C.SCG_GAT_NEIGHBOUR_ER: "sc_gat_neighbour_er", C.SCG_GAT_SCORE_U: "sc_gat_score_u",
	C.SCG_GAT_SCORE_VEC: "sc_gat_score_vec"}

// Missing lists the optional kernels the loaded module lacks, whose
// operations run on host copies.
func (b *Backend) Missing() []string {
	var m []string
	for k, name := range optional {
		if !b.has(k) {
			m = append(m, name)
		}
	}
	sort.Strings(m)
	return m
}

// onHost runs f on host copies: the path of an optional operation whose
// kernel the module lacks. ins are read, outs read and written (nil
// entries are skipped).
func (b *Backend) onHost(f func(), ins, outs []*matrix.Dense) {
	for _, d := range append(ins, outs...) {
		if d != nil {
			b.Download(d)
		}
	}
	f()
	for _, d := range outs {
		if d != nil {
			b.Upload(d)
		}
	}
}

// ELU applies GAT's activation in place (kernels.ELUOps).
func (b *Backend) ELU(z *matrix.Dense) {
	if !b.has(C.SCG_ELU) {
		b.onHost(func() { kernels.ELU(z) }, nil, []*matrix.Dense{z})
		return
	}
	b.ok(C.scg_elu(b.g, b.out(z), C.longlong(z.Rows*z.Cols)), "elu")
}

// ELUBackward multiplies g by ELU's derivative read off its output h.
func (b *Backend) ELUBackward(g, h *matrix.Dense) {
	if !b.has(C.SCG_ELU_BWD) {
		b.onHost(func() { kernels.ELUBackward(g, h) }, []*matrix.Dense{h}, []*matrix.Dense{g})
		return
	}
	b.ok(C.scg_elu_backward(b.g, b.out(g), b.in(h), C.longlong(g.Rows*g.Cols)), "elu backward")
}

// Add sets a += b (kernels.ElementOps).
func (b *Backend) Add(a, x *matrix.Dense) {
	if !b.has(C.SCG_ADD) {
		b.onHost(func() { kernels.Add(a, x) }, []*matrix.Dense{x}, []*matrix.Dense{a})
		return
	}
	b.ok(C.scg_add(b.g, b.out(a), b.in(x), C.longlong(a.Rows*a.Cols)), "add")
}

// ScaleRows sets row r of dst to row r of src times s[r], for the rows s
// lists; s is uploaded per call (a batch's degrees change).
func (b *Backend) ScaleRows(dst, src *matrix.Dense, s []float32) {
	if len(s) == 0 || dst.Cols == 0 {
		return
	}
	if !b.has(C.SCG_SCALE_ROWS) {
		b.onHost(func() { kernels.ScaleRows(dst, src, s) }, []*matrix.Dense{src}, []*matrix.Dense{dst})
		return
	}
	v := b.grow(&b.scales, len(s)*4)
	b.upload(v, f32(s), len(s)*4)
	b.ok(C.scg_scale_rows(b.g, b.out(dst), b.in(src), v.p, C.longlong(len(s)), C.int(dst.Cols)), "scale rows")
}

func cbool(v bool) C.int {
	if v {
		return 1
	}
	return 0
}

// SpMM computes C = A·B (or C += A·B).
func (b *Backend) SpMM(c *matrix.Dense, a *matrix.CSR, x *matrix.Dense, acc bool) error {
	if err := kernels.CheckMul("spmm", c, a.Rows, a.Cols, x); err != nil {
		return err
	}
	if a.Rows == 0 || x.Cols == 0 {
		return nil
	}
	d := b.csr(a)
	b.spmm(d, d.val.p, b.in(x), b.out(c), x.Cols, acc)
	return b.err
}

// gemm is C[i][j] = Σ_p A(i,p)·B(p,j) through strides (see sc_gemm).
func (b *Backend) gemm(a, x, c C.scg_ptr, m, n, k, sai, sap, sbp, sbj int, acc bool) {
	b.ok(C.scg_gemm(b.g, a, x, c, C.int(m), C.int(n), C.longlong(k), C.longlong(sai), C.longlong(sap),
		C.longlong(sbp), C.longlong(sbj), C.longlong(max(k, 1)), 1, cbool(acc)), "gemm")
}

// GEMM computes C = A·B (or C += A·B).
func (b *Backend) GEMM(c, a, x *matrix.Dense, acc bool) error {
	if err := kernels.CheckMul("gemm", c, a.Rows, a.Cols, x); err != nil {
		return err
	}
	if a.Rows == 0 || c.Cols == 0 {
		return nil
	}
	if a.Cols == 0 {
		if !acc {
			b.Zero(c)
		}
		return b.err
	}
	b.gemm(b.in(a), b.in(x), b.out(c), a.Rows, x.Cols, a.Cols, a.Cols, 1, x.Cols, 1, acc)
	return b.err
}

// GEMMNT computes C = A·Bᵀ: A m×n, B k×n.
func (b *Backend) GEMMNT(c, a, x *matrix.Dense) error {
	if err := kernels.CheckMulNT("gemm A·Bᵀ", c, a, x); err != nil {
		return err
	}
	if a.Rows == 0 || c.Cols == 0 {
		return nil
	}
	if a.Cols == 0 {
		b.Zero(c)
		return b.err
	}
	b.gemm(b.in(a), b.in(x), b.out(c), a.Rows, x.Rows, a.Cols, a.Cols, 1, 1, x.Cols, false)
	return b.err
}

// GEMMTN computes C = Aᵀ·B: A m×k, B m×n. The long inner dimension m is
// split into fixed slices whose partial products are added in order.
func (b *Backend) GEMMTN(c, a, x *matrix.Dense) error {
	if err := kernels.CheckMulTN("gemm Aᵀ·B", c, a.Rows, a.Cols, x); err != nil {
		return err
	}
	if c.Rows*c.Cols == 0 {
		return nil
	}
	if a.Rows == 0 {
		b.Zero(c)
		return b.err
	}
	b.gemmTN(b.in(a), b.in(x), b.out(c), a.Rows, a.Cols, x.Cols)
	return b.err
}

func (b *Backend) gemmTN(a, x, c C.scg_ptr, m, k, n int) {
	slabs := (m + tnChunk - 1) / tnChunk
	s := b.grow(&b.slab, slabs*k*n*4)
	if !b.ok(C.scg_gemm(b.g, a, x, s.p, C.int(k), C.int(n), C.longlong(m), 1, C.longlong(k), C.longlong(n), 1,
		tnChunk, C.int(slabs), 0), "gemm Aᵀ·B") {
		return
	}
	b.ok(C.scg_reduce(b.g, s.p, C.longlong(slabs), C.longlong(k*n), c, 0), "reduce")
}

// AddBiasReLU adds bias to every row of z and clamps at 0 when relu is set.
func (b *Backend) AddBiasReLU(z *matrix.Dense, bias []float32, relu bool) {
	if z.Rows*z.Cols == 0 {
		return
	}
	v := b.grow(&b.vec, len(bias)*4)
	b.upload(v, f32(bias), len(bias)*4)
	b.ok(C.scg_bias_relu(b.g, b.out(z), v.p, C.longlong(z.Rows*z.Cols), C.int(z.Cols), cbool(relu)), "bias+relu")
}

// ReLUBackward zeroes g where h ≤ 0.
func (b *Backend) ReLUBackward(g, h *matrix.Dense) {
	b.ok(C.scg_relu_backward(b.g, b.out(g), b.in(h), C.longlong(g.Rows*g.Cols)), "relu backward")
}

func (b *Backend) idsOf(ids []int64) C.scg_ptr {
	if len(ids) == 0 {
		return 0
	}
	return list(b, b.ids, ids).p
}

// Dropout sets dst = src ⊙ mask / (1−p) with the CPU's masks.
func (b *Backend) Dropout(m matrix.Mask, dst, src *matrix.Dense) {
	if m.P <= 0 {
		if dst != src && devBuf(dst) != devBuf(src) {
			b.Copy(dst, src)
		}
		return
	}
	if src.Rows*src.Cols == 0 {
		return
	}
	b.ok(C.scg_dropout_dense(b.g, b.in(src), b.out(dst), C.longlong(src.Rows), C.int(src.Cols),
		C.ulonglong(m.Seed), C.ulonglong(m.Stream), C.longlong(m.Row0), b.idsOf(m.IDs),
		C.uint(m.Threshold()), C.float(m.KeepScale())), "dropout")
}

// i32 is a label or row list on the device (uploaded when its values change).
func (b *Backend) i32(s []int32) C.scg_ptr {
	if len(s) == 0 {
		return 0
	}
	return list(b, b.i32s, s).p
}

// LossGrad is the softmax cross-entropy over rows on the device: the
// gradient stays there, the per-row losses are added on the host in order.
func (b *Backend) LossGrad(logits *matrix.Dense, labels, rows []int32, norm float64, grad *matrix.Dense) float64 {
	b.Zero(grad)
	if len(rows) == 0 || logits.Cols == 0 {
		return 0
	}
	lp := b.grow(&b.loss, len(rows)*8)
	if !b.ok(C.scg_softmax_ce(b.g, b.in(logits), C.int(logits.Cols), b.i32(labels), b.i32(rows), C.longlong(len(rows)),
		C.double(norm), b.out(grad), lp.p), "softmax cross-entropy") {
		return 0
	}
	host := make([]float64, len(rows))
	if !b.ok(C.scg_download(b.g, unsafe.Pointer(&host[0]), lp.p, C.size_t(len(host)*8)), "download") {
		return 0
	}
	var s float64
	for _, v := range host {
		s += v
	}
	return s
}

// ColumnSums adds the rows of g into out: per-slice sums on the device,
// added in slice order on the host.
func (b *Backend) ColumnSums(out []float32, g *matrix.Dense) {
	clear(out)
	if g.Rows == 0 || g.Cols == 0 {
		return
	}
	chunks := (g.Rows + tnChunk - 1) / tnChunk
	p := b.grow(&b.partial, chunks*g.Cols*8)
	if !b.ok(C.scg_colsum(b.g, b.in(g), C.longlong(g.Rows), C.int(g.Cols), tnChunk, C.int(chunks), p.p), "column sums") {
		return
	}
	host := make([]float32, chunks*g.Cols)
	if !b.ok(C.scg_download(b.g, f32(host), p.p, C.size_t(len(host)*4)), "download") {
		return
	}
	for z := 0; z < chunks; z++ {
		for c := range out {
			out[c] += host[z*g.Cols+c]
		}
	}
}

// Norm is ‖d‖_F (block sums on the device in double, added on the host).
func (b *Backend) Norm(d *matrix.Dense) float64 {
	total := d.Rows * d.Cols
	if total == 0 {
		return 0
	}
	blocks := min(1024, (total+255)/256)
	p := b.grow(&b.partial, blocks*8)
	if !b.ok(C.scg_sumsq(b.g, b.in(d), C.longlong(total), C.int(blocks), p.p), "norm") {
		return 0
	}
	host := make([]float64, blocks)
	if !b.ok(C.scg_download(b.g, unsafe.Pointer(&host[0]), p.p, C.size_t(blocks*8)), "download") {
		return 0
	}
	var s float64
	for _, v := range host {
		s += v
	}
	return math.Sqrt(s)
}

// Scale multiplies d by s.
func (b *Backend) Scale(d *matrix.Dense, s float32) {
	b.ok(C.scg_scale(b.g, b.out(d), C.float(s), C.longlong(d.Rows*d.Cols)), "scale")
}

// Triad runs a = x + s·c on the device: the benchmark's bandwidth yardstick.
func (b *Backend) Triad(a, x, c *matrix.Dense, s float32) {
	b.ok(C.scg_triad(b.g, b.out(a), b.in(x), b.in(c), C.float(s), C.longlong(a.Rows*a.Cols)), "triad")
}

// Input puts the layer-1 operand on the device.
func (b *Backend) Input(o *kernels.Operand) (kernels.Input, error) {
	// A cluster batch makes an input per step: free the buffers of those gone.
	for k, own := range b.inputs {
		if k.Value() == nil {
			for _, x := range own.bufs {
				b.free(x)
			}
			delete(b.inputs, k)
		}
	}
	in := &input{b: b, own: &owned{}}
	b.inputs[weak.Make(in)] = in.own
	if a := o.Sparse(); a != nil {
		in.csr = a
		in.a = b.csr(a)
		in.drop = in.alloc(len(a.Val) * 4)
		in.cur = in.a.val.p
	} else {
		d := o.DenseValues()
		in.dense = in.newDense(d.Rows, d.Cols)
		copy(in.dense.Data, d.Data)
		b.Upload(in.dense)
		in.curDense = in.dense
	}
	return in, b.err
}

// owned lists an input's device buffers, freed once the input is gone.
type owned struct{ bufs []*buf }

func (in *input) alloc(bytes int) *buf {
	x := in.b.alloc(bytes)
	in.own.bufs = append(in.own.bufs, x)
	return x
}

func (in *input) newDense(rows, cols int) *matrix.Dense {
	d := in.b.NewDense(rows, cols)
	in.own.bufs = append(in.own.bufs, devBuf(d))
	return d
}

// input is X (or ÂX) on the device, with its dropout applied on the device.
type input struct {
	b *Backend
	// sparse operand
	csr     *matrix.CSR
	trHost  *matrix.CSR // Oᵀ, kept while its device copy (tr) is in use
	a, tr   *devCSR
	perm    *buf
	drop    *buf
	cur     C.scg_ptr // values in use: a's, or drop's
	trFresh bool
	// dense operand
	dense, dropped, curDense *matrix.Dense
	own                      *owned
}

func (in *input) SetDropout(m matrix.Mask) {
	b := in.b
	in.trFresh = false
	if in.csr == nil {
		in.curDense = in.dense
		if m.P > 0 {
			if in.dropped == nil {
				in.dropped = in.newDense(in.dense.Rows, in.dense.Cols)
			}
			b.Dropout(m, in.dropped, in.dense)
			in.curDense = in.dropped
		}
		return
	}
	in.cur = in.a.val.p
	if m.P > 0 && in.a.nnz > 0 {
		b.ok(C.scg_dropout_csr(b.g, in.a.rowptr.p, in.a.col.p, in.a.val.p, in.drop.p, C.longlong(in.a.rows),
			C.ulonglong(m.Seed), C.ulonglong(m.Stream), C.longlong(m.Row0), b.idsOf(m.IDs),
			C.uint(m.Threshold()), C.float(m.KeepScale())), "dropout (sparse input)")
		in.cur = in.drop.p
	}
}

func (in *input) Mul(c, w *matrix.Dense) error {
	b := in.b
	if in.csr == nil {
		return b.GEMM(c, in.curDense, w, false)
	}
	if err := kernels.CheckMul("input O·W", c, in.csr.Rows, in.csr.Cols, w); err != nil {
		return err
	}
	b.spmm(in.a, in.cur, b.in(w), b.out(c), w.Cols, false)
	return b.err
}

// MulT is Oᵀ·G through Oᵀ in CSR form, its values refreshed from the
// current (dropped) ones by a permutation built once.
func (in *input) MulT(c, g *matrix.Dense) error {
	b := in.b
	if in.csr == nil {
		return b.GEMMTN(c, in.curDense, g)
	}
	a := in.csr
	if err := kernels.CheckMulTN("input Oᵀ·G", c, a.Rows, a.Cols, g); err != nil {
		return err
	}
	if in.tr == nil {
		t := a.Transpose()
		in.trHost, in.tr = t, b.csr(t)
		perm := make([]int64, a.NNZ())
		next := append([]int64(nil), t.RowPtr[:a.Cols]...)
		for r := 0; r < a.Rows; r++ {
			for p := a.RowPtr[r]; p < a.RowPtr[r+1]; p++ {
				col := a.ColIdx[p]
				perm[p] = next[col]
				next[col]++
			}
		}
		in.perm = in.alloc(len(perm) * 8)
		if len(perm) > 0 {
			b.upload(in.perm, unsafe.Pointer(&perm[0]), len(perm)*8)
		}
	}
	if !in.trFresh && in.a.nnz > 0 {
		b.ok(C.scg_permute(b.g, in.cur, in.tr.val.p, in.perm.p, C.longlong(in.a.nnz)), "transpose values")
		in.trFresh = true
	}
	b.spmm(in.tr, in.tr.val.p, b.in(g), b.out(c), g.Cols, false)
	return b.err
}

// Handles are the CUDA context and stream this backend queues work on, for
// a communication library that must order its transfers with the kernels
// (collectives/nccl).
func (b *Backend) Handles() (ctx, stream unsafe.Pointer) {
	return unsafe.Pointer(b.g.ctx), unsafe.Pointer(b.g.stream)
}

// DevicePtr is the device address of a matrix made by a CUDA backend.
func DevicePtr(d *matrix.Dense) (uintptr, bool) {
	x := devBuf(d)
	if x == nil {
		return 0, false
	}
	return uintptr(x.p), true
}
