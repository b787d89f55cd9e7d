// Issue 24's matmul lab: kernel variants timed side by side on one adapter
// with GPU timestamps, then webfusion's own product (plain, either operand
// transposed, with an epilogue, batched) from a profile's timestamps.
// Square products whose size is a multiple of every tile; each result is
// checked against dot products computed on the host. One run on the H200
// prints the table the matmul module's docs quote.
//
// `cargo run --release --example matmul_lab -- 4096 2048 1024 512`
// - `NOLAB=1`: skip the variants, time webfusion's product only.
// - `RAW=dir`: also time each WGSL file in `dir`, a webfusion matmul kernel
//   (as a profile's `wgsl` gives it) bound to square row-major operands;
//   a file named `*const*` gets its sizes written in as constants.
// - `WGSL=form`: print the WGSL of webfusion's product of that form
//   (`plain`, `b transposed`, ...) with a GPU's kernel shapes, and stop.
use std::fmt::Write;
use webfusion::Device;

#[derive(Clone, Copy, Debug)]
struct V {
    bm: usize,
    bn: usize,
    bk: usize,
    tm: usize,
    tn: usize,
    stages: usize,
    unroll: bool,
    checks: u8, // 0 all on, 1 bounds only (no loop bounding), 2 none
    split: usize,
}

fn wgsl(v: V) -> String {
    let (tr, tc) = (v.bm / v.tm, v.bn / v.tn);
    let wg = tr * tc;
    let la = v.bm * v.bk / 4 / wg;
    let lb = v.bk * v.bn / 4 / wg;
    assert!(
        la * wg * 4 == v.bm * v.bk && lb * wg * 4 == v.bk * v.bn,
        "{v:?}"
    );
    let mut s = String::new();
    let _ = write!(
        s,
        "@group(0) @binding(0) var<storage, read> A: array<vec4<f32>>;\n\
         @group(0) @binding(1) var<storage, read> B: array<vec4<f32>>;\n\
         @group(0) @binding(2) var<storage, read_write> C: array<vec4<f32>>;\n\
         @group(0) @binding(3) var<uniform> dims: vec4<u32>;\n\
         var<workgroup> sa: array<array<vec4<f32>, {}>, {}>;\n\
         var<workgroup> sb: array<array<vec4<f32>, {}>, {}>;\n\
         @compute @workgroup_size({wg})\n\
         fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{\n\
         let N = dims.y; let K = dims.z;\n\
         let row0 = wid.y * {}u; let col0 = wid.x * {}u;\n\
         let kchunk = K / {}u; let k0 = wid.z * kchunk; let k1 = k0 + kchunk;\n\
         let ty = lid / {tc}u; let tx = lid % {tc}u;\n",
        v.bm / 4,
        v.bk * v.stages,
        v.bn / 4,
        v.bk * v.stages,
        v.bm,
        v.bn,
        v.split,
    );
    for i in 0..v.tm {
        for g in 0..v.tn / 4 {
            let _ = writeln!(s, "var acc{i}_{g} = vec4<f32>(0.0);");
        }
    }
    // Fetch into registers for depth `tt`.
    let mut fetch = String::new();
    for q in 0..la {
        let _ = writeln!(
            fetch,
            "{{ let e = lid + {}u; let am = e / {}u; let ak = (e % {}u) * 4u; fa{q} = A[((row0 + am) * K + tt + ak) / 4u]; }}",
            q * wg,
            v.bk / 4,
            v.bk / 4
        );
    }
    for q in 0..lb {
        let _ = writeln!(
            fetch,
            "{{ let e = lid + {}u; let bk = e / {}u; let bn = e % {}u; fb{q} = B[((tt + bk) * N + col0) / 4u + bn]; }}",
            q * wg,
            v.bn / 4,
            v.bn / 4
        );
    }
    let mut store = String::new();
    for q in 0..la {
        let _ = writeln!(
            store,
            "{{ let e = lid + {}u; let am = e / {}u; let ak = (e % {}u) * 4u + st; sa[ak][am / 4u][am % 4u] = fa{q}.x; sa[ak + 1u][am / 4u][am % 4u] = fa{q}.y; sa[ak + 2u][am / 4u][am % 4u] = fa{q}.z; sa[ak + 3u][am / 4u][am % 4u] = fa{q}.w; }}",
            q * wg,
            v.bk / 4,
            v.bk / 4
        );
    }
    for q in 0..lb {
        let _ = writeln!(
            store,
            "{{ let e = lid + {}u; let bk = e / {}u; let bn = e % {}u; sb[bk + st][bn] = fb{q}; }}",
            q * wg,
            v.bn / 4,
            v.bn / 4
        );
    }
    for q in 0..la {
        let _ = writeln!(s, "var fa{q}: vec4<f32>;");
    }
    for q in 0..lb {
        let _ = writeln!(s, "var fb{q}: vec4<f32>;");
    }
    let _ = write!(
        s,
        "{{ let tt = k0; {fetch} }}\n{{ let st = 0u; {store} }}\nworkgroupBarrier();\n"
    );
    let _ = writeln!(
        s,
        "var step = 0u;\nfor (var t = k0; t < k1; t = t + {}u) {{",
        v.bk
    );
    let _ = writeln!(s, "let base = (step % {}u) * {}u;", v.stages, v.bk);
    let _ = writeln!(
        s,
        "let more = t + {}u < k1;\nif (more) {{ let tt = t + {}u; {fetch} }}",
        v.bk, v.bk
    );
    let mut inner = String::new();
    for g in 0..v.tm / 4 {
        let _ = writeln!(inner, "let a{g} = sa[base + kk][ty + {}u];", tr * g);
    }
    for g in 0..v.tn / 4 {
        let _ = writeln!(inner, "let b{g} = sb[base + kk][tx + {}u];", tc * g);
    }
    for i in 0..v.tm {
        for g in 0..v.tn / 4 {
            let _ = writeln!(
                inner,
                "acc{i}_{g} = fma(vec4<f32>(a{}[{}]), b{g}, acc{i}_{g});",
                i / 4,
                i % 4
            );
        }
    }
    if v.unroll {
        for kk in 0..v.bk {
            let _ = writeln!(s, "{{ let kk = {kk}u;\n{inner}}}");
        }
    } else {
        let _ = writeln!(
            s,
            "for (var kk = 0u; kk < {}u; kk = kk + 1u) {{\n{inner}}}",
            v.bk
        );
    }
    if v.stages == 2 {
        let _ = writeln!(
            s,
            "if (more) {{ let st = ((step + 1u) % 2u) * {}u; {store} }}\nworkgroupBarrier();",
            v.bk
        );
    } else {
        let _ = writeln!(
            s,
            "workgroupBarrier();\nif (more) {{ let st = 0u; {store} }}\nworkgroupBarrier();"
        );
    }
    s += "step = step + 1u;\n}\n";
    // Outputs: rows 4*ty + 4*tr*(i/4) + i%4, vec4 columns tx + tc*g.
    let out = if v.split > 1 {
        "wid.z * dims.x * N / 4u + "
    } else {
        ""
    };
    for i in 0..v.tm {
        for g in 0..v.tn / 4 {
            let _ = writeln!(
                s,
                "C[{out}(row0 + 4u * ty + {}u) * N / 4u + col0 / 4u + tx + {}u] = acc{i}_{g};",
                4 * tr * (i / 4) + i % 4,
                tc * g
            );
        }
    }
    s += "}\n";
    s
}

fn main() {
    let sizes: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![4096, 2048, 1024, 512]
    } else {
        sizes
    };
    pollster::block_on(async {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .unwrap();
        let alim = adapter.limits();
        println!(
            "adapter limits: workgroup storage {} invocations {} subgroups {:?}",
            alim.max_compute_workgroup_storage_size,
            alim.max_compute_invocations_per_workgroup,
            adapter.features().contains(wgpu::Features::SUBGROUP)
        );
        let limits = wgpu::Limits {
            max_compute_workgroup_storage_size: alim.max_compute_workgroup_storage_size.min(49152),
            max_compute_invocations_per_workgroup: alim
                .max_compute_invocations_per_workgroup
                .min(1024),
            max_compute_workgroup_size_x: alim.max_compute_workgroup_size_x.min(1024),
            max_storage_buffer_binding_size: alim.max_storage_buffer_binding_size,
            max_buffer_size: alim.max_buffer_size,
            ..Default::default()
        };
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: None,
                required_features: wgpu::Features::TIMESTAMP_QUERY,
                required_limits: limits,
                experimental_features: wgpu::ExperimentalFeatures::disabled(),
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            })
            .await
            .unwrap();
        let mut variants = vec![];
        let c = V {
            bm: 128,
            bn: 128,
            bk: 16,
            tm: 8,
            tn: 8,
            stages: 1,
            unroll: true,
            checks: 1,
            split: 1,
        };
        variants.push(V {
            checks: 0,
            unroll: false,
            ..c
        });
        variants.push(V { unroll: false, ..c });
        variants.push(c);
        variants.push(V {
            bn: 256,
            tn: 16,
            bk: 8,
            ..c
        });
        variants.push(V {
            bn: 256,
            tn: 16,
            ..c
        });
        variants.push(V {
            bn: 256,
            tn: 16,
            bk: 8,
            stages: 2,
            ..c
        });
        variants.push(V {
            bm: 256,
            tm: 16,
            ..c
        });
        variants.push(V { bm: 64, ..c });
        variants.push(V {
            bm: 64,
            bn: 64,
            ..c
        });
        variants.push(V {
            bm: 64,
            bn: 64,
            tm: 4,
            tn: 4,
            unroll: false,
            ..c
        });
        variants.push(V {
            bm: 64,
            bn: 64,
            tm: 4,
            tn: 4,
            ..c
        });
        variants.push(V {
            bm: 64,
            bn: 128,
            tm: 4,
            tn: 8,
            ..c
        });
        variants.push(V {
            bm: 32,
            bn: 64,
            tm: 4,
            tn: 4,
            ..c
        });
        variants.push(V { bk: 8, ..c });
        variants.push(V { bm: 64, bk: 8, ..c });
        variants.push(V { split: 2, ..c });
        variants.push(V {
            bm: 64,
            split: 2,
            ..c
        });
        for &n in &sizes {
            let nn = (n * n) as usize;
            let ha: Vec<f32> = (0..nn)
                .map(|i| ((i * 7 + 3) % 13) as f32 / 13.0 - 0.5)
                .collect();
            let hb: Vec<f32> = (0..nn)
                .map(|i| ((i * 5 + 1) % 11) as f32 / 11.0 - 0.5)
                .collect();
            use wgpu::util::DeviceExt;
            let buf = |data: &[f32], usage| {
                device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: None,
                    contents: bytemuck::cast_slice(data),
                    usage,
                })
            };
            let ba = buf(&ha, wgpu::BufferUsages::STORAGE);
            let bb = buf(&hb, wgpu::BufferUsages::STORAGE);
            let bc = device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: (nn * 4 * 4) as u64,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let dims = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents: bytemuck::cast_slice(&[n, n, n, 0]),
                usage: wgpu::BufferUsages::UNIFORM,
            });
            let mut raws: Vec<(String, String)> = std::env::var("RAW")
                .ok()
                .and_then(|d| std::fs::read_dir(d).ok())
                .map(|it| {
                    it.filter_map(|e| e.ok())
                        .map(|e| {
                            (
                                e.file_name().to_string_lossy().to_string(),
                                std::fs::read_to_string(e.path()).unwrap(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            raws.sort();
            for (name, text) in &raws {
                let words: [u32; 12] = [n, n, n, n / 64, n / 128, 1, 0, n, 1, 0, n, 1];
                let text = if name.contains("const") {
                    let mut t = text.clone();
                    for (i, w) in words.iter().enumerate() {
                        t = t.replace(&format!("param({i}u)"), &format!("{w}u"));
                    }
                    t
                } else {
                    text.clone()
                };
                let params = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: None,
                    contents: bytemuck::cast_slice(&words),
                    usage: wgpu::BufferUsages::UNIFORM,
                });
                let checks = wgpu::ShaderRuntimeChecks {
                    force_loop_bounding: false,
                    ..wgpu::ShaderRuntimeChecks::checked()
                };
                let buffers = [&params, &ba, &bb, &bc];
                let groups = [(n / 64) * (n / 128), 1, 1];
                let (ms, got) =
                    match time_kernel((&device, &queue), text, checks, buffers, 3, groups, n).await
                    {
                        Ok(timed) => timed,
                        Err(e) => {
                            println!("{n} {name}: error {e}");
                            continue;
                        }
                    };
                let med = ms[ms.len() / 2];
                let err = error_of(&got, &ha, &hb, n as usize, n as usize);
                let tf = 2.0 * (n as f64).powi(3) / (med * 1e-3) / 1e12;
                println!("{n} raw {name}: {med:.4} ms = {tf:.1} TFLOP/s err {err:.1e}");
            }
            for &v in variants.iter().filter(|_| std::env::var("NOLAB").is_err()) {
                let (tr, tc) = (v.bm / v.tm, v.bn / v.tn);
                let wg = tr * tc;
                let smem = (v.bm + v.bn) * v.bk * v.stages * 4;
                if wg > 1024
                    || smem > limits_ok(&device)
                    || !(n as usize).is_multiple_of(v.bm)
                    || !(n as usize).is_multiple_of(v.bn)
                    || !(n as usize).is_multiple_of(v.bk * v.split)
                {
                    println!("{n} {v:?}: skipped (wg {wg}, smem {smem})");
                    continue;
                }
                let text = wgsl(v);
                let checks = match v.checks {
                    0 => wgpu::ShaderRuntimeChecks::checked(),
                    1 => wgpu::ShaderRuntimeChecks {
                        force_loop_bounding: false,
                        ..wgpu::ShaderRuntimeChecks::checked()
                    },
                    _ => wgpu::ShaderRuntimeChecks::unchecked(),
                };
                let buffers = [&ba, &bb, &bc, &dims];
                let groups = [n / v.bn as u32, n / v.bm as u32, v.split as u32];
                let (ms, got) =
                    match time_kernel((&device, &queue), text, checks, buffers, 2, groups, n).await
                    {
                        Ok(timed) => timed,
                        Err(e) => {
                            println!("{n} {v:?}: error {e}");
                            continue;
                        }
                    };
                let med = ms[ms.len() / 2];
                // Split 0's partials when split.
                let err = error_of(&got, &ha, &hb, n as usize, n as usize / v.split);
                let tf = 2.0 * (n as f64).powi(3) / (med * 1e-3) / 1e12;
                println!(
                    "{n} bm{} bn{} bk{} t{}x{} wg{wg} st{} unroll{} checks{} split{}: {med:.4} ms = {tf:.1} TFLOP/s (min {:.4}) err {err:.1e}",
                    v.bm,
                    v.bn,
                    v.bk,
                    v.tm,
                    v.tn,
                    v.stages,
                    v.unroll as u8,
                    v.checks,
                    v.split,
                    ms[0]
                );
            }
        }
        // webfusion's own product, its kernel time from timestamps: plain,
        // the right operand transposed, with an epilogue, and batched.
        let wgsl_of = std::env::var("WGSL").ok();
        let options = webfusion::DeviceOptions {
            cpu_kernels: wgsl_of.as_ref().map(|_| false),
            ..Default::default()
        };
        let gpu = Device::request(options).await.unwrap();
        println!("adapter: {}", gpu.adapter_info());
        {
            // Warm the GPU's clocks.
            let a = gpu.random_uniform(&[2048, 2048], -1.0, 1.0, 1).unwrap();
            let t = std::time::Instant::now();
            while t.elapsed().as_secs_f64() < 1.0 && wgsl_of.is_none() {
                let c: Vec<_> = (0..20).map(|_| a.matmul(&a).unwrap()).collect();
                gpu.sync().await.unwrap();
                drop(c);
            }
        }
        for &n in &sizes {
            let n = n as usize;
            let a = gpu.random_uniform(&[n, n], -1.0, 1.0, 1).unwrap();
            let b = gpu.random_uniform(&[n, n], -1.0, 1.0, 2).unwrap();
            let bias = gpu.random_uniform(&[n], -1.0, 1.0, 3).unwrap();
            let h = n / 2;
            let ab = gpu.random_uniform(&[8, h, h], -1.0, 1.0, 4).unwrap();
            let bb = gpu.random_uniform(&[8, h, h], -1.0, 1.0, 5).unwrap();
            gpu.sync().await.unwrap();
            let forms: [(&str, &dyn Fn() -> webfusion::Tensor); 5] = [
                ("plain", &|| a.matmul(&b).unwrap()),
                ("b transposed", &|| {
                    a.matmul(&b.transpose(None).unwrap()).unwrap()
                }),
                // A weight's gradient, x^T dy.
                ("a transposed", &|| {
                    a.transpose(None).unwrap().matmul(&b).unwrap()
                }),
                ("bias+relu", &|| {
                    a.matmul(&b).unwrap().add(&bias).unwrap().relu().unwrap()
                }),
                ("batched 8", &|| ab.matmul(&bb).unwrap()),
            ];
            for (name, form) in forms {
                if wgsl_of.as_ref().is_some_and(|w| w != name) {
                    continue;
                }
                let mut best = f64::MAX;
                for _ in 0..4 {
                    let (c, profile) = gpu.profile(|| (0..30).map(|_| form()).collect::<Vec<_>>());
                    gpu.sync().await.unwrap();
                    drop(c);
                    if wgsl_of.is_some() {
                        println!("{}", profile.kernels[0].wgsl.join("\n---\n"));
                        return;
                    }
                    // A form's kernels, summed (a copied operand's copy
                    // and its product).
                    let per = (profile.kernels.len() / 30).max(1);
                    let mut ms: Vec<f64> = profile
                        .kernels
                        .chunks(per)
                        .filter_map(|c| c.iter().map(|k| k.kernel_ms).sum::<Option<f64>>())
                        .collect();
                    if ms.len() >= 30 {
                        ms.sort_by(f64::total_cmp);
                        best = best.min(ms[ms.len() / 2]);
                    }
                }
                let flop = if name.starts_with("batched") {
                    2.0 * 8.0 * (h as f64).powi(3)
                } else {
                    2.0 * (n as f64).powi(3)
                };
                let tf = flop / (best * 1e-3) / 1e12;
                println!("webfusion matmul {n} {name}: {best:.4} ms = {tf:.1} TFLOP/s");
            }
        }
        drop(gpu);
    });
}

fn limits_ok(device: &wgpu::Device) -> usize {
    device.limits().max_compute_workgroup_storage_size as usize
}

/// Compiles `text` with `checks`, binds `buffers` at bindings 0 to 3 and
/// times `groups` workgroups a pass, from timestamps, after a round of
/// warm-up: the sorted times in ms, and row 1's first 16 outputs of the
/// product, which the kernel writes into `buffers[out]`.
async fn time_kernel(
    (device, queue): (&wgpu::Device, &wgpu::Queue),
    text: String,
    checks: wgpu::ShaderRuntimeChecks,
    buffers: [&wgpu::Buffer; 4],
    out: usize,
    groups: [u32; 3],
    n: u32,
) -> Result<(Vec<f64>, Vec<f32>), String> {
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let module = unsafe {
        device.create_shader_module_trusted(
            wgpu::ShaderModuleDescriptor {
                label: None,
                source: wgpu::ShaderSource::Wgsl(text.into()),
            },
            checks,
        )
    };
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: None,
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    if let Some(e) = scope.pop().await {
        return Err(e.to_string());
    }
    let entries: Vec<wgpu::BindGroupEntry> = buffers
        .iter()
        .enumerate()
        .map(|(i, b)| wgpu::BindGroupEntry {
            binding: i as u32,
            resource: b.as_entire_binding(),
        })
        .collect();
    let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &entries,
    });
    let reps = ((4096.0f64 / n as f64).powi(3) * 12.0).clamp(12.0, 400.0) as u32;
    let period = queue.get_timestamp_period() as f64;
    let qs = device.create_query_set(&wgpu::QuerySetDescriptor {
        label: None,
        ty: wgpu::QueryType::Timestamp,
        count: reps * 2,
    });
    let buffer = |size: u64, usage| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage,
            mapped_at_creation: false,
        })
    };
    let stamp_bytes = u64::from(reps * 2 * 8);
    let resolve = buffer(
        stamp_bytes,
        wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
    );
    let readq = buffer(
        stamp_bytes,
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    );
    let check = buffer(
        64,
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
    );
    for round in 0..2 {
        let mut enc = device.create_command_encoder(&Default::default());
        for r in 0..reps {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: None,
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &qs,
                    beginning_of_pass_write_index: Some(2 * r),
                    end_of_pass_write_index: Some(2 * r + 1),
                }),
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        }
        enc.resolve_query_set(&qs, 0..reps * 2, &resolve, 0);
        enc.copy_buffer_to_buffer(&resolve, 0, &readq, 0, stamp_bytes);
        enc.copy_buffer_to_buffer(buffers[out], u64::from(n) * 4, &check, 0, 64);
        queue.submit([enc.finish()]);
        readq.slice(..).map_async(wgpu::MapMode::Read, |_| {});
        check.slice(..).map_async(wgpu::MapMode::Read, |_| {});
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| e.to_string())?;
        if round == 0 {
            readq.unmap();
            check.unmap();
        }
    }
    let stamps: Vec<u64> =
        bytemuck::cast_slice::<u8, u64>(&readq.slice(..).get_mapped_range().unwrap()).to_vec();
    let got: Vec<f32> =
        bytemuck::cast_slice::<u8, f32>(&check.slice(..).get_mapped_range().unwrap()).to_vec();
    let mut ms: Vec<f64> = (0..reps as usize)
        .map(|r| (stamps[2 * r + 1] - stamps[2 * r]) as f64 * period / 1e6)
        .collect();
    ms.sort_by(f64::total_cmp);
    Ok((ms, got))
}

/// The largest relative error of `got`, row 1's first outputs, against
/// the host's dot products over the first `depth` of the `n`-deep operands.
fn error_of(got: &[f32], ha: &[f32], hb: &[f32], n: usize, depth: usize) -> f32 {
    got.iter()
        .enumerate()
        .map(|(j, g)| {
            let want: f32 = (0..depth).map(|k| ha[n + k] * hb[k * n + j]).sum();
            (want - g).abs() / (1.0 + want.abs())
        })
        .fold(0.0, f32::max)
}
