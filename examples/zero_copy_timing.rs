// Scratch (issue 24): whether W1's shape of work (a host array in, one
// elementwise kernel, the whole result back) can beat wgpu's transfer floor
// natively when the kernel reads and writes mapped buffers itself
// (`MAPPABLE_PRIMARY_BUFFERS`, native only: WebGPU has no such buffers).
// Each row is the median of 30 iterations after 5 warm-ups, wgpu alone:
// - staged: `write_buffer`, the kernel, a copy to a MAP_READ buffer, map,
//   copy out (what webfusion does);
// - out mapped: `write_buffer`, the kernel writes a STORAGE|MAP_READ buffer;
// - zero copy, new: a STORAGE|MAP_WRITE buffer mapped at creation each
//   iteration, the kernel writes a STORAGE|MAP_READ buffer;
// - zero copy, premapped: as above with an input buffer mapped for writing
//   before the iteration (a pool that maps a buffer once its kernel is done).
// Arguments: element counts (default 2^20 and 2^22).
use std::time::Instant;

const SHADER: &str = "
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
    let stride = n.x * 256u;
    for (var i = g.x; i < arrayLength(&x); i += stride) {
        let v = x[i];
        var a = tanh(exp(v * 0.5 + 0.1) * v);
        a = tanh((1.0 / (1.0 + exp(0.2 - a)) + v) * 1.5);
        y[i] = tanh(exp(0.9 / (1.0 + exp(-(a + v)))) - v);
    }
}";

fn main() {
    let sizes: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1 << 20, 1 << 22]
    } else {
        sizes
    };
    pollster::block_on(async {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
        desc.backends = wgpu::Backends::VULKAN | wgpu::Backends::METAL;
        let instance = wgpu::Instance::new(desc);
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .unwrap();
        let mappable = adapter
            .features()
            .contains(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS);
        println!(
            "adapter: {:?}, MAPPABLE_PRIMARY_BUFFERS: {mappable}",
            adapter.get_info().name
        );
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                required_features: if mappable {
                    wgpu::Features::MAPPABLE_PRIMARY_BUFFERS
                } else {
                    wgpu::Features::empty()
                },
                required_limits: wgpu::Limits::default(),
                ..Default::default()
            })
            .await
            .unwrap();
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: None,
            source: wgpu::ShaderSource::Wgsl(SHADER.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: None,
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        let wait = || device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
        let buffer = |bytes: u64, usage: wgpu::BufferUsages, mapped: bool| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: bytes,
                usage,
                mapped_at_creation: mapped,
            })
        };
        use wgpu::BufferUsages as U;
        for n in sizes {
            let bytes = n * 4;
            let host: Vec<f32> = (0..n).map(|i| (i % 13) as f32 * 0.1 - 0.6).collect();
            let host_bytes: &[u8] = bytemuck::cast_slice(&host);
            let run =
                |input: &wgpu::Buffer, output: &wgpu::Buffer, copy_to: Option<&wgpu::Buffer>| {
                    let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
                        label: None,
                        layout: &pipeline.get_bind_group_layout(0),
                        entries: &[
                            wgpu::BindGroupEntry {
                                binding: 0,
                                resource: input.as_entire_binding(),
                            },
                            wgpu::BindGroupEntry {
                                binding: 1,
                                resource: output.as_entire_binding(),
                            },
                        ],
                    });
                    let mut encoder = device.create_command_encoder(&Default::default());
                    {
                        let mut pass = encoder.begin_compute_pass(&Default::default());
                        pass.set_pipeline(&pipeline);
                        pass.set_bind_group(0, &bind, &[]);
                        pass.dispatch_workgroups(((n / 256).min(4096)) as u32, 1, 1);
                    }
                    if let Some(to) = copy_to {
                        encoder.copy_buffer_to_buffer(output, 0, to, 0, bytes);
                    }
                    queue.submit([encoder.finish()]);
                };
            let read = |from: &wgpu::Buffer| -> Vec<f32> {
                from.map_async(wgpu::MapMode::Read, .., |r| r.unwrap());
                wait();
                let out = bytemuck::cast_slice(&from.get_mapped_range(..).unwrap()).to_vec();
                from.unmap();
                out
            };
            let off_clock = std::cell::Cell::new(0.0);
            let time = |name: &str,
                        f: &mut dyn FnMut() -> Vec<f32>,
                        reference: Option<&Vec<f32>>|
             -> Vec<f32> {
                let mut last = Vec::new();
                let mut times = Vec::new();
                for i in 0..35 {
                    let t = Instant::now();
                    last = f();
                    if i >= 5 {
                        times.push(t.elapsed().as_secs_f64() * 1e3 - off_clock.take());
                    }
                }
                times.sort_by(f64::total_cmp);
                let same = reference.map(|r| r == &last);
                println!(
                    "{n} elements: {name}: {:.3} ms (min {:.3}){}",
                    times[times.len() / 2],
                    times[0],
                    match same {
                        Some(true) => ", same values",
                        Some(false) => ", VALUES DIFFER",
                        None => "",
                    }
                );
                last
            };
            let input = buffer(bytes, U::STORAGE | U::COPY_DST, false);
            let output = buffer(bytes, U::STORAGE | U::COPY_SRC, false);
            let staging = buffer(bytes, U::MAP_READ | U::COPY_DST, false);
            let reference = time(
                "staged (write_buffer, kernel, copy, map, copy out)",
                &mut || {
                    queue.write_buffer(&input, 0, host_bytes);
                    run(&input, &output, Some(&staging));
                    read(&staging)
                },
                None,
            );
            let mut memcpy = Vec::new();
            let mut times = Vec::new();
            for _ in 0..30 {
                let t = Instant::now();
                memcpy = host.clone();
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
            times.sort_by(f64::total_cmp);
            println!(
                "{n} elements: a host memcpy: {:.3} ms ({})",
                times[15],
                memcpy.len()
            );
            if !mappable {
                continue;
            }
            let out_mapped = buffer(bytes, U::STORAGE | U::MAP_READ, false);
            time(
                "out mapped (write_buffer, kernel into a MAP_READ buffer, map, copy out)",
                &mut || {
                    queue.write_buffer(&input, 0, host_bytes);
                    run(&input, &out_mapped, None);
                    read(&out_mapped)
                },
                Some(&reference),
            );
            time(
                "zero copy, new input buffer each iteration",
                &mut || {
                    let fresh = buffer(bytes, U::STORAGE | U::MAP_WRITE, true);
                    fresh
                        .get_mapped_range_mut(..)
                        .unwrap()
                        .copy_from_slice(host_bytes);
                    fresh.unmap();
                    run(&fresh, &out_mapped, None);
                    read(&out_mapped)
                },
                Some(&reference),
            );
            let premapped = buffer(bytes, U::STORAGE | U::MAP_WRITE, true);
            time(
                "zero copy, premapped input",
                &mut || {
                    premapped
                        .get_mapped_range_mut(..)
                        .unwrap()
                        .copy_from_slice(host_bytes);
                    premapped.unmap();
                    run(&premapped, &out_mapped, None);
                    let out = read(&out_mapped);
                    // The pool's map for the next use, off the iteration's
                    // clock in a real pipeline: done here after the read.
                    let t = Instant::now();
                    premapped.map_async(wgpu::MapMode::Write, .., |r| r.unwrap());
                    wait();
                    off_clock.set(t.elapsed().as_secs_f64() * 1e3);
                    out
                },
                Some(&reference),
            );
        }
    });
}
