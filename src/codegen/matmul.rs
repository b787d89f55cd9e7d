//! The register-tiled matrix product, with its epilogue fused.
//!
//! Why the kernel is shaped as it is. Figures: native wgpu on Vulkan on an
//! H200, kernel time from timestamps; `examples/matmul_lab.rs` times
//! hand-written variants ("lab") and this kernel ("ours") in one run.
//! Ours went 29.2 -> 36.6 TFLOP/s at 4096 (PyTorch fp32: 51.3) and 18.3
//! -> 27.2 at 1024 (PyTorch: 37.8) with the first four items below; with
//! all of them, on an H100 (the same run as PyTorch's): 44.9 at 4096
//! (PyTorch 51.5), 33.8 at 2048 (41.5), 32.2 at 1024 (22.6).
//! - **Each thread an r x r block of outputs** (`Tiling::for_product`):
//!   r = 8 on 64x128 tiles of 128 threads where there is work for 128 such
//!   workgroups (a 1024 square), else 4 on 64x64 tiles of 256 threads, or
//!   a narrow tile for a narrow product. Each value staged in workgroup
//!   memory is used r times from registers. In the lab, 64x128 tiles of
//!   128 threads beat 128x128 of 256 (4096: 39.6 against 34.9 TFLOP/s)
//!   and 64x64 of 256 at 4x4 (1024: 33.6 against 29.0): more workgroups
//!   are resident at once.
//! - **No forced loop bounding** (`runtime::Compiler::now`): wgpu's extra
//!   counter in every iteration cost the lab's kernel 10% at 4096.
//! - **A GPU's 8x8 kernel's depths unrolled**, so its workgroup reads have
//!   constant first indices: ours, 4096 32.1 -> 36.6, 1024 19.9 -> 27.2.
//! - **A column-major operand is staged down its columns** in the 8x8
//!   kernel, neighbouring threads reading neighbouring words
//!   (`column_major`): a transposed right operand at 4096 went 18.5 ->
//!   32.2 (the plain product: 36.6). On a GPU a right operand whose
//!   columns are aligned is read four at a time down them
//!   (`Access::in_fours`), and `tb`'s rows get one vector more, so the
//!   four threads that store one column's depths do not all meet in one
//!   bank: on an H100, transposed over plain went 86% -> 87-91% at 4096,
//!   86% -> 95% at 3072 and 1536, 82% -> 94% at 1024, but 105% -> 95% at
//!   2048 (and 86% -> 85% at 2560). Without the extra vector, these loads
//!   were slower than one by one (the H200 figures in `read`), and the
//!   extra vector alone changed nothing. The 4x4 kernel reads a transposed
//!   operand along its rows.
//! - **No edge checks where no edge is crossed** (`Guards`): a product of
//!   whole tiles and whole slices checks nothing, and in other products
//!   the 8x8 kernel fetches a slice inside both operands unguarded (a
//!   uniform branch). The checks that zero the edges cost ours 6% at 4096
//!   (37.9 -> 40.1 with them gone) and 15-20% at 1024 (26.9 -> 31.4), in
//!   the lab's timing of our text.
//! - **A thread's outputs are vectors of four columns**, and each output is
//!   one `put` call (a CPU's 8x8 kernel: one call in a loop): the text is
//!   written for every launch (and hashed to find its pipeline), and this
//!   made the 8x8 kernel's 68 KB -> 26 KB, 125 -> 36 us of codegen per
//!   launch here.
//! - **A thread's rows and columns come in runs of four** (`Layout4`), so
//!   one depth of the staged tiles is r / 4 vector loads per operand, not r
//!   scalar ones: at r = 8, 4 workgroup loads feed 64 multiply-adds
//!   instead of 16.
//! - **The next slice is fetched into registers while this one
//!   multiplies** (`Staging`): the global loads are in flight during the
//!   arithmetic, and the two barriers of a step only cover the stores to
//!   workgroup memory and the reads of it.
//! - **A stored operand four floats at a time** from global memory along
//!   its rows, where they are contiguous and 16-byte aligned
//!   (`Access::in_fours`). A transposed one (a gradient's products read one)
//!   is read through its layout, in place: a left operand four at a time
//!   down its columns (along the tile, one vector store); a right one down
//!   its columns in the 8x8 kernel with `tb` padded (above), one by one
//!   elsewhere (unpadded, four at a time ran 2048 at 23.4 TFLOP/s against
//!   32.6 one by one on the H200). Only a GPU's product of 2048 rows or
//!   more copies a transposed right operand row-major first
//!   (`copies_right_operand`): there the copy costs less than staging down
//!   columns loses. A convolution's operands use both directions
//!   (`codegen::conv`).
//! - **16 deep slices** on a GPU: a slice of both operands fits WebGPU's
//!   guaranteed 16 KiB of workgroup memory; deeper ones would need a limit
//!   not every adapter grants. (In the lab, 128x256 tiles, 24 KiB, ran
//!   4096 at 43.6 TFLOP/s: a next step where an adapter grants the memory.)
//! - **The epilogue is fused**: each output goes through the elementwise
//!   ops that follow the product before it is written.
//! - **A CPU adapter's tiles have 64 threads** (`Tiling::for_product`):
//!   32x32 at 4x4 for a small product, in slices that fit 2 KiB, and 64x64
//!   at 8x8, 8 deep, its loops kept, for a large one. There a pipeline's
//!   compile grows with its workgroup memory and its length, and barriers
//!   cost more than on a GPU (SwiftShader ran W4's steps 0.58x the time
//!   on these tiles).
//!
//! Left for later (issue 24): subgroup and cooperative-matrix operations,
//! split-K for products with few tiles, and larger tiles where the adapter
//! grants more workgroup memory.

use std::fmt::Write;

use crate::ir::layout::Layout;
use crate::ir::shape;

use super::elementwise::{AnchorParts, fused};
use super::kernel::*;

/// A vector's lanes, in order.
const LANES: [&str; 4] = ["x", "y", "z", "w"];

/// The depth of one staged slice of a GPU's tiles: 16 fits both operands'
/// slices of a 64x128 tile in WebGPU's guaranteed 16 KiB.
const DEPTH: usize = 16;

/// The depth of one staged slice of a CPU's 32x32 and 64x64 tiles
/// (`Tiling::for_product`): 8, so they declare 2 and 4 KiB. SwiftShader,
/// against 16: W9's first step 5.1 -> 3.5 s and its steps 0.92x the time
/// (32x32); W4's first step 6.1 -> 3.4 s, its steps 1.02x the time
/// (64x64). At 4 deep W4's first step took 2.7 s but its steps 1.10x,
/// W2-1024's 1.25x. A CPU's 16x16 tiles keep 16 (2 KiB too): W8's
/// convolutions of 8 and 16 channels, on them, ran 1.08x as long at 8.
const CPU_DEPTH: usize = 8;

/// The most multiply-adds a product has to take a CPU's smaller tiles
/// (`Tiling::for_product`): 2^26, between W9's largest products (2^24,
/// faster on them, and their 2 KiB kernels compile in a third of the time
/// of the 8x8 kernel's 4 KiB) and W4's (10^8, slower).
const CPU_SMALL: usize = 1 << 26;

/// The fewest rows or columns a tile has: a slice of a narrower one would
/// be staged by some threads only, which lost SwiftShader its device.
pub(super) const NARROWEST_TILE: usize = 16;

/// The two directions an operand's vectors of four can run in its last two
/// dims (a matrix's, or a convolution's implicit one).
#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum Vectors {
    /// Along the last dim (rows are contiguous).
    Rows,
    /// Along the rows dim (columns are contiguous).
    Columns,
}

/// Whether a matmul operand is stored column by column (its rows dim, not
/// its last, is contiguous: a transposed matrix): its tile is then staged
/// walking down columns, so neighbouring threads read neighbouring words.
/// Walking along rows, each thread's read was a row's stride from the
/// next one's, and a transposed right operand ran at half the speed of a
/// stored one (H200, 4096: 18.5 against 32.1 TFLOP/s).
fn column_major(operand: &Operand<'_>) -> bool {
    match operand {
        Operand::Matrix(access) => {
            let strides = &access.layout.strides;
            let r = strides.len();
            strides[r - 1] != 1 && strides[r - 2] == 1
        }
        Operand::Loaded { .. } => false,
    }
}

/// Batched `a @ b` with broadcast batch dims, and its epilogue: output tiles
/// staged through shared memory, each of a workgroup's threads holding an r x r
/// block of outputs in registers (in runs of four, `Layout4`), each
/// output then passed through the elementwise ops that follow the product
/// (`epilogue`: the anchored block, the ops, how to read its inputs). Operands
/// are read through their layouts: this kernel copies nothing (a large
/// transposed right operand is copied before it, `copies_right_operand`).
/// Writes `[batch.., m, n]` row-major.
pub fn matmul(
    a: &Access,
    b: &Access,
    out_shape: &[usize],
    epilogue: Group<'_>,
    cpu: bool,
) -> Kernel {
    let k = a.shape[a.shape.len() - 1];
    let operands = [Operand::Matrix(a), Operand::Matrix(b)];
    product(Params::default(), operands, out_shape, k, epilogue, cpu)
}

/// The fewest rows a GPU's product has for a transposed right operand to be
/// copied row-major first (`copies_right_operand`). On an H100, kernel
/// time of the copy and the plain kernel against the 8x8 kernel staging
/// the operand down its columns, as a share of the plain product's:
/// 4096 95% against 91%, 2560 94% against 85%, but 3072 94% against 96%,
/// 2048 93% against 95%, 1536 89% against 94%, 1024 82% against 93%.
/// From 2048 rows every size is within 7% of plain; below it the copy is
/// too large a share of the product. One card's figures: where the copy
/// wins (2560, 4096) and loses two points (2048, 3072) depends on how the
/// staging meets its banks, and one threshold keeps every size within 10%.
const COPY_ROWS: usize = 2048;

/// Whether a product copies its right operand row-major and runs the plain
/// kernel, rather than staging it down its columns: on a GPU, for a
/// column-major operand of a product of at least `COPY_ROWS` rows, where
/// the copy (one read and one write of the operand) is small beside the
/// product, which reads the operand once per row of tiles. Decided in
/// lowering, which launches the copy; the product's text is the plain one.
/// Never for an operand broadcast along a dim (a stride of 0): its copy
/// would be larger than the memory it reads, past the limits the block
/// was planned within. Without one, the copy is no larger than the buffer.
pub fn copies_right_operand(b: &Access, out_shape: &[usize], cpu: bool) -> bool {
    let rank = out_shape.len();
    let broadcast = b
        .layout
        .strides
        .iter()
        .zip(&b.shape)
        .any(|(&s, &d)| s == 0 && d > 1);
    !cpu && rank >= 2
        && out_shape[rank - 2] >= COPY_ROWS
        && !broadcast
        && column_major(&Operand::Matrix(b))
}

/// How a product reads one of its operands.
pub(super) enum Operand<'a> {
    /// A matrix (`[batch.., rows, cols]`, its batch dims broadcast), read
    /// through its layout.
    Matrix(&'a Access),
    /// An operand whose element is computed from where it is: the WGSL
    /// function `function` (`fn load_a(base: u32, i: u32, j: u32) -> f32`,
    /// `load_b` for the second) reads it at row (or depth) `i`, depth (or
    /// column) `j`, `base` being `offset` plus the batch coordinate times
    /// `batch_stride` (a convolution's windows, `conv::operands`).
    Loaded {
        offset: usize,
        batch_stride: usize,
        function: String,
        /// The same function four elements at a time, returning a
        /// `vec4<f32>` of neighbours along the dim `Vectors` names, its
        /// binding an array of vectors: taken where the tile is wide
        /// enough (as a matrix's vector loads are), `function` elsewhere.
        vector: Option<(Vectors, String)>,
    },
}

/// The tiled product of `operands` (`k` deep) into `[batch.., m, n]`
/// (`out_shape`), with its epilogue: the kernel `matmul` and the
/// convolutions share. `params` holds what the operands' functions read;
/// `cpu` says the adapter is a CPU (`Tiling::for_product`).
pub(super) fn product(
    mut params: Params,
    operands: [Operand<'_>; 2],
    out_shape: &[usize],
    k: usize,
    epilogue: Group<'_>,
    cpu: bool,
) -> Kernel {
    let rank = out_shape.len();
    let batch_shape = &out_shape[..rank - 2];
    let (m, n) = (out_shape[rank - 2], out_shape[rank - 1]);
    let Tiling { threads, r, depth } = Tiling::for_product(m, n, k, shape::numel(batch_shape), cpu);
    let (tile_m, tile_n) = (threads.rows * r, threads.cols * r);
    let (tiles_m, tiles_n) = (m.div_ceil(tile_m), n.div_ceil(tile_n));
    let batches = shape::numel(batch_shape);

    let p_m = params.push(m);
    let p_n = params.push(n);
    let p_k = params.push(k);
    let p_tm = params.push(tiles_m);
    let p_tn = params.push(tiles_n);
    let p_batches = params.push(batches);
    let mut body = format!(
        "    // Every thread of a workgroup has the same `wg`: the return is uniform.\n\
         \x20   let tile_n = wg % {p_tn};\n    let tile_m = (wg / {p_tn}) % {p_tm};\n    let batch = wg / ({p_tn} * {p_tm});\n\
         \x20   if (batch >= {p_batches}) {{ return; }}\n\
         \x20   let ty = lid / {cols}u;\n    let tx = lid % {cols}u;\n\
         \x20   let row0 = tile_m * {tile_m}u;\n    let col0 = tile_n * {tile_n}u;\n",
        cols = threads.cols,
    );
    coords(&mut body, &mut params, "batch", "b", batch_shape);
    let mut functions = String::new();
    // Each operand's base (and strides, for a matrix), whether it loads
    // four at a time, and how one element of its tile is read.
    // The 8x8 kernel, for large products.
    let large = r == 8;
    // Four at a time only where each thread's share of a slice is whole
    // vectors (a tile of 64 on 256 threads, of 32 on 64).
    let wide = |tile: usize| (tile * depth).is_multiple_of(4 * threads.count());
    let mut read = |params: &mut Params, operand: &Operand<'_>, name: &str, wide: bool| {
        match operand {
            Operand::Matrix(access) => {
                // The batch dims of this operand, read at the output's batch position.
                let r = access.shape.len();
                let batch = Access {
                    shape: access.shape[..r - 2].to_vec(),
                    layout: Layout {
                        offset: access.layout.offset,
                        strides: access.layout.strides[..r - 2].to_vec(),
                    },
                    dtype: access.dtype,
                };
                let base = strided_index(params, &batch, batch_shape, "b");
                let (rows, cols) = (
                    params.push(access.layout.strides[r - 2]),
                    params.push(access.layout.strides[r - 1]),
                );
                let (i, j, buffer) = match name {
                    "a" => ("ar", "ac", "in0"),
                    _ => ("br", "bc", "in1"),
                };
                let along_rows = wide && access.in_fours(r - 1);
                // Down the columns (an aligned contiguous dim either way,
                // `Access::in_fours`):
                // - a right operand only in a GPU's 8x8 kernel, whose `tb`
                //   rows are padded for it (module docs): unpadded, those
                //   loads ran slower than one by one (H200, 2048 23.4
                //   against 32.6 TFLOP/s, 4096 34.0 against 34.4, 1024 25.4
                //   against 26.3), and so did attention's 64-wide products
                //   in the 4x4 kernel on SwiftShader (1.05-1.09x the time);
                // - a left operand (a weight's gradient, x^T dy) in every
                //   kernel: four neighbours along the tile, stored as one
                //   vector as a stored right operand's are, where one by one
                //   took four loads and four stores (SwiftShader ran W4's
                //   steps, whose weight gradients these are, as fast: 0.98x
                //   the time in ten alternating runs).
                let down = wide
                    && access.in_fours(r - 2)
                    && match name {
                        "b" => large && !cpu,
                        _ => !along_rows,
                    };
                let vectors = match down {
                    true => Some(Vectors::Columns),
                    false => along_rows.then_some(Vectors::Rows),
                };
                // Along a vector's dim the stride is 1: not multiplied.
                let index = match vectors {
                    None => format!("{name}_base + {i} * {name}_rows + {j} * {name}_cols"),
                    Some(Vectors::Rows) => format!("({name}_base + {i} * {name}_rows + {j}) / 4u"),
                    Some(Vectors::Columns) => {
                        format!("({name}_base + {i} + {j} * {name}_cols) / 4u")
                    }
                };
                (
                    format!(
                        "    let {name}_base = {base};\n    let {name}_rows = {rows};\n    let {name}_cols = {cols};\n"
                    ),
                    vectors,
                    format!("{buffer}[{index}]"),
                )
            }
            Operand::Loaded {
                offset,
                batch_stride,
                function,
                vector,
            } => {
                let vector = vector.as_ref().filter(|_| wide);
                functions += vector.map_or(function, |(_, f)| f);
                let base = match batch_shape.is_empty() {
                    true => params.push(*offset),
                    false => format!(
                        "{} + b0 * {}",
                        params.push(*offset),
                        params.push(*batch_stride)
                    ),
                };
                let (i, j) = match name {
                    "a" => ("ar", "ac"),
                    _ => ("br", "bc"),
                };
                (
                    format!("    let {name}_base = {base};\n"),
                    vector.map(|&(v, _)| v),
                    format!("load_{name}({name}_base, {i}, {j})"),
                )
            }
        }
    };
    let [a, b] = &operands;
    let (a_base, vectors_a, a_elem) = read(&mut params, a, "a", wide(tile_m));
    let (b_base, vectors_b, b_elem) = read(&mut params, b, "b", wide(tile_n));
    body += &a_base;
    body += &b_base;
    let layout = Layout4::of(r);
    // A thread's outputs: row i's four columns of run g are one vector
    // `acc{i}_{g}` in runs of four (one line of text per four
    // multiply-adds: with `put`, the 8x8 kernel's text, written for every
    // launch, went 68 KB -> 26 KB), one scalar `acc{i}_{j}` each otherwise.
    let runs = match layout {
        Layout4::Vectors => r / 4,
        Layout4::Scalars => r,
    };
    let zero = match layout {
        Layout4::Vectors => "vec4<f32>(0.0)",
        Layout4::Scalars => "0.0",
    };
    for i in 0..r {
        for g in 0..runs {
            let _ = writeln!(body, "    var acc{i}_{g} = {zero};");
        }
    }
    // An operand read by a function one element at a time is staged by a
    // loop (`Staging`); one it reads four at a time is fetched ahead.
    let looped = [(a, vectors_a), (b, vectors_b)]
        .map(|(o, v)| matches!(o, Operand::Loaded { .. }) && v.is_none());
    // The 8x8 kernel (large products) stages a column-major operand down
    // its columns; the 4x4 one does not, as SwiftShader ran a step of
    // 784x512 products 2-4% slower with it.
    let guards = match (m % tile_m, n % tile_n, k % depth, large) {
        (0, 0, 0, _) if k > 0 => Guards::None,
        (.., true) => Guards::AtEdges,
        _ => Guards::Every,
    };
    let staging = Staging::new(
        [tile_m, tile_n, threads.count(), depth],
        [large && column_major(a), large && column_major(b)],
        guards,
        [(vectors_a, &a_elem), (vectors_b, &b_elem)],
        looped,
        [&p_m, &p_n, &p_k],
        layout,
    );
    body += &staging.before;
    let _ = writeln!(body, "    for (var t = 0u; t < {p_k}; t = t + {depth}u) {{");
    body += &staging.top;
    body += "        workgroupBarrier();\n";
    body += &staging.next;
    // A thread's values of this depth: r scalars of each operand, or r / 4
    // vectors (one workgroup load each, not four).
    let mut step = String::new();
    let groups = if layout == Layout4::Vectors { r / 4 } else { r };
    for g in 0..groups {
        let _ = writeln!(
            step,
            "            let a{g} = ta[kk][ty + {}u];",
            threads.rows * g
        );
    }
    for g in 0..groups {
        let _ = writeln!(
            step,
            "            let b{g} = tb[kk][tx + {}u];",
            threads.cols * g
        );
    }
    for i in 0..r {
        let a = match layout {
            Layout4::Vectors => format!("a{}.{}", i / 4, LANES[i % 4]),
            Layout4::Scalars => format!("a{i}"),
        };
        for g in 0..runs {
            let _ = writeln!(step, "            acc{i}_{g} = acc{i}_{g} + {a} * b{g};");
        }
    }
    // A GPU's 8x8 kernel's depths unrolled: each depth's workgroup reads
    // then have constant first indices. H200, 4096: 32.1 -> 36.6 TFLOP/s;
    // 1024: 19.9 -> 27.2. The 4x4 kernel and a CPU's 8x8 keep their loop:
    // a short shader for the CPU adapters that compile it in the first
    // step, and SwiftShader ran W4's steps 0.81x the time, W2-1024's 0.75x,
    // with the loop than with it unrolled.
    if large && !cpu {
        body += "        {\n";
        for kk in 0..depth {
            let _ = writeln!(body, "        {{ let kk = {kk}u;\n{step}        }}");
        }
    } else {
        let _ = writeln!(
            body,
            "        for (var kk = 0u; kk < {depth}u; kk = kk + 1u) {{\n{step}"
        );
    }
    body += "        }\n        workgroupBarrier();\n    }\n";
    let checked = guards != Guards::None;
    let put = write_outputs(&mut body, r, threads, layout, [&p_m, &p_n], [checked, cpu]);
    let element = |wide: bool| if wide { "vec4<f32>" } else { "f32" };
    let (staged, per_row) = match layout {
        Layout4::Vectors => ("vec4<f32>", 4),
        Layout4::Scalars => ("f32", 1),
    };
    let mut decls = format!(
        "@group(0) @binding(1) var<storage, read> in0: array<{}>;\n\
         @group(0) @binding(2) var<storage, read> in1: array<{}>;\n\
         var<workgroup> ta: array<array<{staged}, {}>, {depth}>;\n\
         var<workgroup> tb: array<array<{staged}, {}>, {depth}>;\n",
        element(vectors_a.is_some()),
        element(vectors_b.is_some()),
        tile_m / per_row,
        // A matrix right operand staged down its columns: its four threads
        // per column store a row of `tb` apart, 128 words (one bank)
        // unpadded. (A convolution's operand read down its columns is not
        // padded: measured neither way.)
        tile_n / per_row
            + usize::from(matches!(b, Operand::Matrix(_)) && vectors_b == Some(Vectors::Columns)),
    );
    decls += &functions;
    let (bindings, function) = fused(epilogue, &mut params, 3, AnchorParts::One);
    decls += &bindings;
    decls += &function;
    decls += &put;
    params.sizes = true;
    params.kernel(
        &decls,
        threads.workgroup(),
        &body,
        (batches * tiles_m * tiles_n) as u64,
    )
}

/// How a thread's r x r outputs sit in the tile, and so how the staged
/// tiles are laid out in workgroup memory.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Layout4 {
    /// r a multiple of 4: a thread's rows (and columns) come in runs of
    /// four, `4 * (ty + rows * g) + q`, so each depth of the staged tiles
    /// is read as r / 4 vectors per operand. Scalar workgroup loads were
    /// the H200's bound: 16 of them fed 64 multiply-adds at r = 8.
    Vectors,
    /// r = 2 (the narrow tiles): rows `ty + rows * i`, read one by one.
    Scalars,
}

impl Layout4 {
    fn of(r: usize) -> Self {
        match r % 4 {
            0 => Layout4::Vectors,
            _ => Layout4::Scalars,
        }
    }

    /// The workgroup-memory place of element `index` of depth `depth` in
    /// tile `array` (`ta` or `tb`).
    fn slot(self, array: &str, depth: &str, index: &str) -> String {
        match self {
            Layout4::Vectors => format!("{array}[{depth}][({index}) / 4u][({index}) % 4u]"),
            Layout4::Scalars => format!("{array}[{depth}][{index}]"),
        }
    }

    /// Thread `lane`'s (`ty` or `tx`) position of its output `i`, across
    /// `threads` lanes: the expression and its constant part.
    fn position(self, lane: &str, threads: usize, i: usize) -> (String, usize) {
        match self {
            Layout4::Vectors => (format!("4u * {lane}"), 4 * threads * (i / 4) + i % 4),
            Layout4::Scalars => (lane.to_string(), threads * i),
        }
    }
}

/// The statements that stage one slice of each operand's tile (`tile_m`
/// by `depth`, `depth` by `tile_n`) into workgroup memory
/// (`ta` transposed, `tb` as is), zero past the edges (`guards` says which
/// fetches check them). The workgroup's threads stage a tile's elements one
/// at a time (down the columns of a column-major operand where `columns`
/// says so), or four at a time from an operand whose tile rows are
/// contiguous and 16-byte aligned.
///
/// A matrix operand's slice is fetched into registers one step ahead
/// (`before` fetches the first, `next` the one after the slice being
/// multiplied), and `top` stores the fetched values: the global loads of
/// step t + 1 are in flight while step t multiplies, instead of every
/// thread waiting for them between two barriers. An operand read by a
/// function (a convolution's windows) is fetched and stored in `top`, by
/// a loop, the function written once: unrolled eight times it made a
/// shader SwiftShader lost its device on.
struct Staging {
    before: String,
    top: String,
    next: String,
}

impl Staging {
    fn new(
        [tile_m, tile_n, threads, depth]: [usize; 4],
        columns: [bool; 2],
        guards: Guards,
        reads: [(Option<Vectors>, &str); 2],
        looped: [bool; 2],
        [p_m, p_n, p_k]: [&str; 3],
        layout: Layout4,
    ) -> Staging {
        let mut staging = Staging {
            before: String::new(),
            top: String::new(),
            next: String::new(),
        };
        // The fetches of a slice, each guarded to read 0 past the edges,
        // and the same unguarded (`inside`) for a slice wholly inside both
        // operands.
        let (mut fetches, mut inside) = (String::new(), String::new());
        // Each operand's tile width, the vectors that run along a slice's
        // depth, and the guard of an element at (`ar`, `ac`) or (`br`, `bc`).
        let operands = [
            (tile_m, Vectors::Rows, format!("ar < {p_m} && ac < {p_k}")),
            (
                tile_n,
                Vectors::Columns,
                format!("br < {p_k} && bc < {p_n}"),
            ),
        ];
        for (o, (tile, depth_vectors, guard)) in operands.into_iter().enumerate() {
            let names = &OPERAND_NAMES[o];
            let (vectors, elem) = reads[o];
            // Each thread's share of a slice: a whole number of elements
            // (`Tiling::for_product`'s test keeps it so).
            let loads = tile * depth / threads;
            if let (false, Some(vectors)) = (looped[o], vectors) {
                let shares = [threads, loads / 4];
                let codes = [&mut fetches, &mut inside];
                let along = vectors == depth_vectors;
                stage_vectors(
                    &mut staging,
                    codes,
                    names,
                    along,
                    [tile, depth],
                    shares,
                    layout,
                    [elem, &guard],
                );
                continue;
            }
            // Where element e of a slice sits (its indices in the slice, and
            // `ar`, `ac` or `br`, `bc` in the operand, for the slice at
            // depth `tt`): neighbouring threads take neighbouring elements
            // of the operand's contiguous dim (`column_major`).
            let OperandNames {
                tile: t,
                depth: d,
                staged,
                fetched,
                ..
            } = names;
            let place = names.place(columns[o] == (o == 1), [tile, depth], 1);
            let store = layout.slot(staged, d, t);
            if looped[o] {
                let value = match guards {
                    Guards::None => elem.to_string(),
                    _ => format!("select(0.0, {elem}, {guard})"),
                };
                let _ = writeln!(
                    staging.top,
                    "        for (var q = 0u; q < {loads}u; q = q + 1u) {{\n\
                     \x20           let e = lid + q * {threads}u; let tt = t;\n\
                     \x20           {place}\n\
                     \x20           {store} = {value};\n\
                     \x20       }}"
                );
                continue;
            }
            for q in 0..loads {
                let e = q * threads;
                let _ = writeln!(staging.before, "    var {fetched}{q} = 0.0;");
                let _ = writeln!(
                    fetches,
                    "            {{ let e = lid + {e}u; {place} {fetched}{q} = select(0.0, {elem}, {guard}); }}"
                );
                let _ = writeln!(
                    inside,
                    "            {{ let e = lid + {e}u; {place} {fetched}{q} = {elem}; }}"
                );
                let _ = writeln!(
                    staging.top,
                    "        {{ let e = lid + {e}u; let tt = t; {place} {store} = {fetched}{q}; }}"
                );
            }
        }
        if !fetches.is_empty() {
            let first = match guards {
                Guards::None => &inside,
                _ => &fetches,
            };
            let _ = write!(
                staging.before,
                "    {{\n        let tt = 0u;\n{first}    }}\n"
            );
            // The condition is the same for every thread: uniform.
            let _ = write!(
                staging.next,
                "        if (t + {depth}u < {p_k}) {{\n            let tt = t + {depth}u;\n"
            );
            // So is the one that a slice is inside (`Guards::AtEdges`).
            match guards {
                Guards::None => staging.next += &inside,
                Guards::AtEdges => {
                    let _ = write!(
                        staging.next,
                        "            if (row0 + {tile_m}u <= {p_m} && col0 + {tile_n}u <= {p_n} && tt + {depth}u <= {p_k}) {{\n{inside}\
                         \x20           }} else {{\n{fetches}            }}\n"
                    );
                }
                Guards::Every => staging.next += &fetches,
            }
            staging.next += "        }\n";
        }
        staging
    }
}

/// Which of a product's fetches check that they are inside its operands
/// (zero past the edges), and whether `put` checks its outputs are.
/// The checks' selects cost an H200 6% of a 4096 product and 20% of a
/// 1024 one where no slice crosses an edge (`examples/matmul_lab.rs`,
/// our text with and without them).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Guards {
    /// Every fetch: the 4x4 kernel, where SwiftShader ran a step of
    /// 784x512 products 2-4% slower with a second, unguarded copy of them.
    Every,
    /// Only a slice that crosses an edge: one uniform branch per slice
    /// picks unguarded fetches for the others (the 8x8 kernel).
    AtEdges,
    /// None: the product is a whole number of tiles and slices, so no
    /// fetch or output is past an edge.
    None,
}

/// How the staging text names one operand's parts: its index in the tile
/// and in the slice's depth, its place in the operand (`ar`, `ac` or `br`,
/// `bc`), its workgroup tile and its fetch registers.
struct OperandNames {
    tile: &'static str,
    depth: &'static str,
    place: &'static str,
    staged: &'static str,
    fetched: &'static str,
}

impl OperandNames {
    /// Where a thread's element (or vector of `width`) `e` of a slice sits:
    /// its indices in the tile and the depth, and in the operand.
    /// Neighbouring threads take neighbouring elements (or vectors) along
    /// the depth where `depth_fastest`, along the tile otherwise.
    fn place(&self, depth_fastest: bool, [tile, depth]: [usize; 2], width: usize) -> String {
        let (t, d) = (self.tile, self.depth);
        let (first, second, per) = match depth_fastest {
            true => (t, d, depth / width),
            false => (d, t, tile / width),
        };
        let second_at = match width {
            1 => format!("e % {per}u"),
            _ => format!("(e % {per}u) * {width}u"),
        };
        format!(
            "let {first} = e / {per}u; let {second} = {second_at}; {}",
            self.place
        )
    }
}

const OPERAND_NAMES: [OperandNames; 2] = [
    OperandNames {
        tile: "am",
        depth: "ak",
        place: "let ar = row0 + am; let ac = tt + ak;",
        staged: "ta",
        fetched: "fa",
    },
    OperandNames {
        tile: "bn",
        depth: "bk",
        place: "let br = tt + bk; let bc = col0 + bn;",
        staged: "tb",
        fetched: "fb",
    },
];

/// Stages an operand loaded four at a time, `along_depth` (a stored left
/// operand, or a convolution's whose channels run along the depth: four
/// depths of one row or column of the tile, stored to four depths) or
/// along the tile (a stored right operand, or a convolution's whose
/// channels run along the tile: four neighbours at one depth, one vector
/// store where the tile holds vectors): each thread's `loads`
/// vectors of a slice (each `load`, zero where not `guard`), declared in
/// `staging.before`, fetched guarded into `fetches` and unguarded into
/// `inside`, stored at `staging.top`.
/// Neighbouring threads take neighbouring vectors of the contiguous dim
/// either way.
#[allow(clippy::too_many_arguments)]
fn stage_vectors(
    staging: &mut Staging,
    [fetches, inside]: [&mut String; 2],
    names: &OperandNames,
    along_depth: bool,
    [tile, depth]: [usize; 2],
    [threads, loads]: [usize; 2],
    layout: Layout4,
    [load, guard]: [&str; 2],
) {
    let OperandNames {
        tile: t,
        depth: d,
        staged,
        fetched,
        ..
    } = names;
    let place = names.place(along_depth, [tile, depth], 4);
    for q in 0..loads {
        let at = format!("let e = lid + {}u; {place}", q * threads);
        let _ = writeln!(staging.before, "    var {fetched}{q} = vec4<f32>(0.0);");
        let _ = writeln!(
            fetches,
            "            {{ {at} {fetched}{q} = select(vec4<f32>(0.0), {load}, {guard}); }}"
        );
        let _ = writeln!(inside, "            {{ {at} {fetched}{q} = {load}; }}");
        let stores: String = match (along_depth, layout) {
            (false, Layout4::Vectors) => format!(" {staged}[{d}][{t} / 4u] = {fetched}{q};"),
            _ => LANES
                .iter()
                .enumerate()
                .map(|(c, lane)| {
                    let slot = match along_depth {
                        true => layout.slot(staged, &format!("{d} + {c}u"), t),
                        false => layout.slot(staged, d, &format!("{t} + {c}u")),
                    };
                    format!(" {slot} = {fetched}{q}.{lane};")
                })
                .collect(),
        };
        let _ = writeln!(staging.top, "        {{ let tt = t; {at}{stores} }}");
    }
}

/// How a product's threads cover its output tile: `rows` by `cols`, each
/// thread an r x r block of outputs `rows` and `cols` apart.
#[derive(Clone, Copy, PartialEq, Debug)]
struct Threads {
    rows: usize,
    cols: usize,
}

/// How a product is tiled: its threads, each thread's r x r outputs, and
/// the depth of the slices of both operands staged at a time.
#[derive(Clone, Copy, PartialEq, Debug)]
struct Tiling {
    threads: Threads,
    r: usize,
    depth: usize,
}

impl Tiling {
    /// The tiling of `batches` products of `m` by `n`, on a GPU
    /// chosen on an H200 (`examples/matmul_lab.rs`, kernel time, 1024 to
    /// 4096 square):
    /// - Enough work for 128 workgroups of 64x128 outputs (a 1024 square)
    ///   gets them: 8x8 outputs per thread, 128 threads. 8x8 reuses each
    ///   staged value eight times from registers, and the smaller workgroup
    ///   keeps more of them resident: 4096 ran 39.6 TFLOP/s against 34.9 on
    ///   128x128 tiles of 256 threads, 1024 33.6 against 29.0 on 64x64.
    /// - Other products at least 64 each way: 4x4 on 64x64 tiles, 256
    ///   threads, so there are enough workgroups to fill the GPU.
    /// - A narrower product: the tile that computes the fewest outputs past
    ///   its edges (ties to the larger r, then the squarer shape): a
    ///   product of 8 columns (a convolution of 8 channels) on a 64x64 tile
    ///   would compute seven eighths of it for nothing.
    ///
    /// On a CPU adapter (`cpu`), tiles of 64 threads, but for a large
    /// product narrower than 64 (a GPU's narrow tile):
    /// - A product of fewer than `CPU_SMALL` multiply-adds: 32x32 at 4x4
    ///   where it fills one, by the narrow rule, in slices as deep as fit
    ///   2 KiB (`CPU_DEPTH`). A pipeline's compile there grows with the
    ///   workgroup memory it declares (SwiftShader: a kernel of 1 KiB
    ///   40 ms, 4 KiB 175 ms, 16 KiB 1.1 s), and the GPU's 64x64 tile's
    ///   8 KiB made each product's pipeline 550 ms of a first W9 step's
    ///   10 s, against 20 ms for its other kernels; and a small product
    ///   ran faster on the smaller tiles too (W9's 1024x64x256 0.67x the
    ///   time, its attention's 0.59x).
    /// - A larger one 64 wide each way: 64x64 at 8x8, 8 deep (4 KiB). It
    ///   loads as little per multiply-add as the GPU's 64x64 tile (one of
    ///   256x512x784 with a transposed operand ran 1.85x as long on 32x32
    ///   tiles), and a thread's 64 outputs pay for each barrier four times
    ///   over. Against the GPU's tiles on SwiftShader: W4's steps 0.58x
    ///   the time, W3's 0.62x, W2-1024's 0.76x; W4's first step 3.9 ->
    ///   3.4 s, and 2.2 s with its outputs written in a loop
    ///   (`write_outputs`).
    fn for_product(m: usize, n: usize, k: usize, batches: usize, cpu: bool) -> Tiling {
        let work = m
            .saturating_mul(n)
            .saturating_mul(k)
            .saturating_mul(batches);
        let cpu_small = cpu && work < CPU_SMALL;
        let gpu = |rows, cols, r| Tiling {
            threads: Threads { rows, cols },
            r,
            depth: DEPTH,
        };
        if cpu && m >= 64 && n >= 64 && !cpu_small {
            return Tiling {
                threads: Threads { rows: 8, cols: 8 },
                r: 8,
                depth: CPU_DEPTH,
            };
        }
        if !cpu_small && m >= 64 && n >= 128 && m.div_ceil(64) * n.div_ceil(128) * batches >= 128 {
            return gpu(8, 16, 8);
        }
        // A product 64 wide each way keeps the square tile: a thinner one
        // wastes less at the edges but reuses each staged value less (W4's
        // 784x512 products ran 1.5x slower on 16x64 tiles).
        if !cpu_small && m >= 64 && n >= 64 {
            return gpu(16, 16, 4);
        }
        let shapes: &[(usize, usize)] = match cpu_small {
            true => &[(8, 8), (16, 4), (4, 16)],
            false => &[(16, 16), (32, 8), (8, 32), (64, 4), (4, 64)],
        };
        let padded = |(rows, cols): (usize, usize), r: usize| {
            let (tm, tn) = (rows * r, cols * r);
            m.div_ceil(tm) * tm * n.div_ceil(tn) * tn
        };
        // Each tile is at least `NARROWEST_TILE` wide (a GPU's 16 deep
        // slice then has 256 elements, one per thread), and both staged
        // slices fit WebGPU's 16 KiB of workgroup memory, or a CPU's 2 KiB
        // at the deeper depth that does.
        let (memory, depths): (usize, &[usize]) = match cpu_small {
            true => (2048, &[DEPTH, CPU_DEPTH]),
            false => (16384, &[DEPTH]),
        };
        let depth = |(rows, cols): (usize, usize), r: usize| {
            let wide = rows * r >= NARROWEST_TILE && cols * r >= NARROWEST_TILE;
            let fits = |&&depth: &&usize| (rows + cols) * r * depth * 4 <= memory;
            depths.iter().find(fits).filter(|_| wide).copied()
        };
        [4, 2]
            .iter()
            .flat_map(|&r| shapes.iter().map(move |&s| (s, r)))
            .filter_map(|(s, r)| Some((s, r, depth(s, r)?)))
            .min_by_key(|&(s, r, _)| padded(s, r))
            .map(|((rows, cols), r, depth)| Tiling {
                threads: Threads { rows, cols },
                r,
                depth,
            })
            .unwrap_or(gpu(16, 16, 4))
    }
}

impl Threads {
    /// How many threads a workgroup has.
    fn count(self) -> usize {
        self.rows * self.cols
    }

    /// The workgroup size the kernel declares: at most 256 by
    /// construction (`Tiling::for_product`); one that were not would fail its
    /// compile, not run.
    fn workgroup(self) -> u32 {
        u32::try_from(self.count()).unwrap_or(u32::MAX)
    }
}

/// Each output goes through the epilogue, which writes what the block
/// writes (the product itself only when it is an output), by `put`, the
/// function returned: one short call per output, or on a CPU (`cpu`) one
/// call in a loop over the 8x8 kernel's outputs. A compiler inlines `put`
/// and the epilogue in it at every call: SwiftShader took 807 ms to compile
/// W4's 8x8 kernel with its 64 calls, 340 ms with the loop. (The 4x4
/// kernel's 16 calls stay: W9's steps ran 1.03x as long on SwiftShader
/// with a loop.)
fn write_outputs(
    body: &mut String,
    r: usize,
    threads: Threads,
    layout: Layout4,
    [p_m, p_n]: [&str; 2],
    [checked, cpu]: [bool; 2],
) -> String {
    if cpu && r == 8 && layout == Layout4::Vectors {
        // Row i's two runs of four picked by a switch (a private array
        // indexed by `i` would keep the accumulators in memory), then its
        // outputs, where `Layout4::position` puts them.
        body.push_str(
            "    for (var i = 0u; i < 8u; i = i + 1u) {\n        var v0 = vec4<f32>(0.0);\n        var v1 = v0;\n        switch i {\n",
        );
        for i in 0..8 {
            let _ = writeln!(
                body,
                "            case {i}u: {{ v0 = acc{i}_0; v1 = acc{i}_1; }}"
            );
        }
        let _ = write!(
            body,
            "            default: {{}}\n        }}\n        for (var j = 0u; j < 8u; j = j + 1u) {{\n\
             \x20           put(batch, row0 + 4u * ty + {}u * (i / 4u) + i % 4u, col0 + 4u * tx + {}u * (j / 4u) + j % 4u, select(v0, v1, j >= 4u)[j % 4u]);\n\
             \x20       }}\n    }}\n",
            4 * threads.rows,
            4 * threads.cols
        );
    } else {
        for i in 0..r {
            let (row_lane, ri) = layout.position("ty", threads.rows, i);
            for j in 0..r {
                let (col_lane, cj) = layout.position("tx", threads.cols, j);
                let acc = match layout {
                    Layout4::Vectors => format!("acc{i}_{}.{}", j / 4, LANES[j % 4]),
                    Layout4::Scalars => format!("acc{i}_{j}"),
                };
                let _ = writeln!(
                    body,
                    "    put(batch, row0 + {row_lane} + {ri}u, col0 + {col_lane} + {cj}u, {acc});"
                );
            }
        }
    }
    let write = format!("_ = fused((batch * {p_m} + row) * {p_n} + col, value);");
    let write = match checked {
        true => format!("if (row < {p_m} && col < {p_n}) {{ {write} }}"),
        false => write,
    };
    format!("fn put(batch: u32, row: u32, col: u32, value: f32) {{\n    {write}\n}}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_product_shape_gets_a_tile_that_fits_webgpu_s_workgroup_memory() {
        let check = |m: usize, n: usize, batches: usize, cpu: bool| {
            let Tiling {
                threads: t,
                r,
                depth,
            } = Tiling::for_product(m, n, 64, batches, cpu);
            assert!(t.count() <= 256, "{m}x{n}");
            let (tm, tn) = (t.rows * r, t.cols * r);
            let bytes = (tm + tn) * depth * 4;
            assert!(bytes <= 16384, "{m}x{n}: {t:?} r {r} stages {bytes} bytes");
            // A CPU's tiles for a small product declare little workgroup
            // memory: it is what their compile grows with.
            let small = m * n * 64 * batches < CPU_SMALL;
            assert!(
                !(cpu && small) || bytes <= 2048,
                "{m}x{n} on a CPU: {bytes} bytes"
            );
            // Each thread stages a whole number of elements of a slice,
            // and a tile 64 wide or more a whole number of vectors (it
            // loads by four, as a CPU's 32 wide does).
            for tile in [tm, tn] {
                assert_eq!(tile * depth % t.count(), 0, "{m}x{n}: {t:?} r {r}");
                let vectors = tile * depth % (4 * t.count());
                assert!(tile < 64 || vectors == 0, "{m}x{n}: {t:?} r {r}");
            }
        };
        for cpu in [false, true] {
            for m in [1, 7, 8, 16, 25, 64, 144, 200, 576, 2048, 5000] {
                for n in [1, 8, 10, 16, 64, 100, 2048, 4096] {
                    for batches in [1, 4, 64] {
                        check(m, n, batches, cpu);
                    }
                }
            }
        }
        // A narrow product takes a narrow tile; none is under 16 wide.
        for cpu in [false, true] {
            let Tiling { threads: t, r, .. } = Tiling::for_product(9216, 8, 64, 1, cpu);
            assert_eq!(t.cols * r, 16, "{t:?} r {r}");
            for (m, n) in [(1, 1), (8, 8), (25, 8), (4096, 1)] {
                let Tiling { threads: t, r, .. } = Tiling::for_product(m, n, 64, 1, cpu);
                assert!(t.rows * r >= 16 && t.cols * r >= 16, "{m}x{n}: {t:?} r {r}");
            }
        }
        // A CPU's small products take the 4x4 kernel on 32x32 tiles in
        // 8-deep slices, its large ones the 8x8 kernel on 64x64 tiles.
        let wide = Tiling {
            threads: Threads { rows: 8, cols: 16 },
            r: 8,
            depth: DEPTH,
        };
        assert_eq!(Tiling::for_product(1024, 1024, 1024, 1, false), wide);
        let cpu_wide = Tiling {
            threads: Threads { rows: 8, cols: 8 },
            r: 8,
            depth: CPU_DEPTH,
        };
        assert_eq!(Tiling::for_product(1024, 1024, 1024, 1, true), cpu_wide);
        let small = Tiling {
            threads: Threads { rows: 8, cols: 8 },
            r: 4,
            depth: CPU_DEPTH,
        };
        assert_eq!(Tiling::for_product(1024, 256, 64, 1, true), small);
        let gpu = Tiling::for_product(1024, 256, 64, 1, false);
        assert_eq!((gpu.threads.count(), gpu.depth), (256, DEPTH));
    }
}
