package cpu

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// The kernels below work on float32 row-major matrices. Shapes are in
// elements; every kernel states its FLOP count, which matches the count
// model.Build puts on the op it serves.

// gonum's Sgemm spreads a product over goroutines when it has at least 4
// output blocks of 64x64 (gonum/blas/gonum: blockSize 64, minParBlock 4).
// A rank is one goroutine standing for one device, so nested goroutines
// would take cores from the other ranks and allocate per call: sgemm cuts
// the output into tiles of at most 64 x 192 (1 x 3 blocks), which gonum
// runs serially.
const tileRows, tileCols = 64, 192

// sgemm computes C[m,n] = op(A) x op(B) with row-major leading dimensions
// lda, ldb, ldc; transB means B is stored [n, k]. A is never transposed.
// 2*m*n*k FLOPs.
func sgemm(transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	impl := blas32.Implementation()
	tB := blas.NoTrans
	if transB {
		tB = blas.Trans
	}
	for i0 := 0; i0 < m; i0 += tileRows {
		mi := min(tileRows, m-i0)
		for j0 := 0; j0 < n; j0 += tileCols {
			nj := min(tileCols, n-j0)
			bv := b[j0:]
			if transB {
				bv = b[j0*ldb:]
			}
			impl.Sgemm(blas.NoTrans, tB, mi, nj, k, 1, a[i0*lda:], lda, bv, ldb, 0, c[i0*ldc+j0:], ldc)
		}
	}
}

// gemm computes C[m,n] = A[m,k] x B[k,n] (row-major, leading dimensions
// equal to the column counts). 2*m*n*k FLOPs.
func gemm(m, n, k int, a, b, c []float32) { sgemm(false, m, n, k, a, k, b, n, c, n) }

// gemmNT computes C[m,n] = A[m,k] x B[n,k]^T. 2*m*n*k FLOPs.
func gemmNT(m, n, k int, a, b, c []float32) { sgemm(true, m, n, k, a, k, b, k, c, n) }

// rmsNorm normalises each of the rows of x[rows, dim] in place:
// x = x / sqrt(mean(x^2) + eps) * w (the RMSNorm of DeepSeek-V3,
// eps = 1e-6). About 4*rows*dim FLOPs.
func rmsNorm(x, w []float32, rows, dim int) {
	const eps = 1e-6
	for r := range rows {
		row := x[r*dim : (r+1)*dim]
		var ss float32
		for _, v := range row {
			ss += v * v
		}
		inv := float32(1 / math.Sqrt(float64(ss/float32(dim))+eps))
		for j := range row {
			row[j] = row[j] * inv * w[j]
		}
	}
}

// siluMul computes out[r, j] = silu(in[r, j]) * in[r, n+j] for in[rows, 2n]
// (SwiGLU's act-and-mul; silu(x) = x / (1 + e^-x)).
func siluMul(in, out []float32, rows, n int) {
	for r := range rows {
		g := in[r*2*n : r*2*n+n]
		u := in[r*2*n+n : (r+1)*2*n]
		o := out[r*n : (r+1)*n]
		for j := range o {
			x := g[j]
			o[j] = x / (1 + float32(math.Exp(float64(-x)))) * u[j]
		}
	}
}

// rope rotates consecutive pairs of x by the angles whose cosines and sines
// are cos[i], sin[i] (pair i): 6 FLOPs per pair.
func rope(x, cos, sin []float32) {
	for i := range cos {
		a, b := x[2*i], x[2*i+1]
		x[2*i] = a*cos[i] - b*sin[i]
		x[2*i+1] = a*sin[i] + b*cos[i]
	}
}

// softmaxRows replaces each row of x[rows, n] by softmax(scale * row).
func softmaxRows(x []float32, rows, n int, scale float32) {
	for r := range rows {
		row := x[r*n : (r+1)*n]
		mx := float32(math.Inf(-1))
		for _, v := range row {
			mx = max(mx, v*scale)
		}
		var sum float32
		for j, v := range row {
			e := float32(math.Exp(float64(v*scale - mx)))
			row[j] = e
			sum += e
		}
		inv := 1 / sum
		for j := range row {
			row[j] *= inv
		}
	}
}

// mlaDecode is absorbed multi-head latent attention for decode (DeepSeek-V2
// paper sec. 2.1.3 with W_UK absorbed into the query; FlashMLA's form).
// For one sequence with its latent cache c[ctx, lat] (lat = kvLora + rope:
// the compressed KV c_KV followed by the shared RoPE key k_R) and rows
// query rows q[rows, lat] (one per query token and head, already
// multiplied by W_UK and rotated):
//
//	scores = q x c^T * scale           [rows, ctx]   2*rows*ctx*lat FLOPs
//	p      = softmax(scores) per row
//	out    = p x c[:, :kvLora]         [rows, kvLora] 2*rows*ctx*kvLora FLOPs
//
// scores is scratch of rows*ctx values. Values live in the kvLora space;
// W_UV (a separate op) maps them back to v_head_dim.
func mlaDecode(q, c, out, scores []float32, rows, ctx, lat, kvLora int, scale float32) {
	sgemm(true, rows, ctx, lat, q, lat, c, lat, scores, ctx)
	softmaxRows(scores, rows, ctx, scale)
	sgemm(false, rows, kvLora, ctx, scores, ctx, c, lat, out, kvLora)
}

// causalAttention is one head of causal attention over n tokens:
// q, k [n, dk], v [n, dv] -> out [n, dv], with scores scratch [n, n].
// Query i attends keys 0..i. The GEMMs run the full n x n square (as a
// dense kernel without causal tiling would); masked entries get weight 0.
func causalAttention(q, k, v, out, scores []float32, n, dk, dv int, scale float32) {
	sgemm(true, n, n, dk, q, dk, k, dk, scores, n)
	for i := range n {
		row := scores[i*n : (i+1)*n]
		softmaxRows(row[:i+1], 1, i+1, scale)
		clear(row[i+1:])
	}
	sgemm(false, n, dv, n, scores, n, v, dv, out, dv)
}

// topK writes, for each row of logits[rows, n], the indices of its k
// largest values (ties: lower index first) into idx[rows, k], in
// descending order of value, and their softmax-normalised values into
// weight[rows, k]. O(rows * n * k) comparisons.
func topK(logits []float32, rows, n, k int, idx []int32, weight []float32) {
	for r := range rows {
		row := logits[r*n : (r+1)*n]
		ids := idx[r*k : (r+1)*k]
		ws := weight[r*k : (r+1)*k]
		cnt := 0
		for j, v := range row {
			// insertion into the descending top list (the last entry
			// drops out when the list is full)
			if cnt == k && v <= ws[k-1] {
				continue
			}
			pos := min(cnt, k-1)
			for pos > 0 && ws[pos-1] < v {
				ws[pos], ids[pos] = ws[pos-1], ids[pos-1]
				pos--
			}
			ws[pos], ids[pos] = v, int32(j)
			if cnt < k {
				cnt++
			}
		}
		// softmax over the selected logits
		mx := ws[0]
		var sum float32
		for j := range ws {
			ws[j] = float32(math.Exp(float64(ws[j] - mx)))
			sum += ws[j]
		}
		for j := range ws {
			ws[j] /= sum
		}
	}
}

// scheduledGroupedGEMM runs a MoE layer's grouped expert GEMM for a
// routing fixed in advance: expert j gets rowsPer[j] rows. With gather, X
// is [tokens, k] token rows and expert rows take tokens in turn (row i of
// the layer from token i mod tokens); otherwise X is [rows, k] in
// expert-major order (the previous expert op's output). W is the experts'
// [k, n] matrices back to back, Y [rows, n] expert-major; xg is scratch
// for the gathered rows. It returns the rows and experts run.
// 2*rows*n*k FLOPs.
func scheduledGroupedGEMM(rowsPer []int, tokens int, x []float32, gather bool, w []float32, k, n int, y, xg []float32) (rows, experts int) {
	for j, c := range rowsPer {
		if c == 0 {
			continue
		}
		xs := xg[rows*k : (rows+c)*k]
		if gather {
			for i := range c {
				t := (rows + i) % max(1, tokens)
				copy(xs[i*k:(i+1)*k], x[t*k:(t+1)*k])
			}
		} else {
			copy(xs, x[rows*k:(rows+c)*k])
		}
		gemm(c, n, k, xs, w[j*k*n:(j+1)*k*n], y[rows*n:(rows+c)*n])
		rows += c
		experts++
	}
	return rows, experts
}
