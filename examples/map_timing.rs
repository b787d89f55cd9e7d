// Scratch (issue 24): what wgpu itself costs to move a large buffer on this
// adapter, without webfusion: `write_buffer` then a submit and wait (the
// upload), and a copy to a MAP_READ buffer, its map, and the copy out of
// the mapped range (the read), each phase timed; the median of five rounds.
// If the copy out of the mapped range alone is slow, the mapped memory is
// not cached on the host.
use std::time::Instant;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(4096);
    let bytes = n * n * 4;
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
        println!("adapter: {:?}", adapter.get_info().name);
        let (device, queue) = adapter.request_device(&Default::default()).await.unwrap();
        let gpu_buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: bytes,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let staging = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let host: Vec<u8> = (0..bytes).map(|i| i as u8).collect();
        let wait = || device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
        let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
        let mut rows: Vec<[f64; 6]> = Vec::new();
        for _ in 0..6 {
            let t = Instant::now();
            queue.write_buffer(&gpu_buffer, 0, &host);
            let write_call = ms(t);
            queue.submit([]);
            wait();
            let upload = ms(t);
            let t = Instant::now();
            let mut encoder = device.create_command_encoder(&Default::default());
            encoder.copy_buffer_to_buffer(&gpu_buffer, 0, &staging, 0, bytes);
            queue.submit([encoder.finish()]);
            wait();
            let copy = ms(t);
            let t = Instant::now();
            staging.map_async(wgpu::MapMode::Read, .., |r| r.unwrap());
            wait();
            let map = ms(t);
            let t = Instant::now();
            let out: Vec<u8> = staging.get_mapped_range(..).unwrap().to_vec();
            let copy_out = ms(t);
            assert_eq!(out[12345], host[12345]);
            staging.unmap();
            let t = Instant::now();
            let again = host.clone();
            let host_copy = ms(t);
            assert_eq!(again.len(), host.len());
            rows.push([write_call, upload, copy, map, copy_out, host_copy]);
        }
        rows.remove(0);
        let median = |k: usize| {
            let mut v: Vec<f64> = rows.iter().map(|r| r[k]).collect();
            v.sort_by(f64::total_cmp);
            v[2]
        };
        let gb = |ms: f64| bytes as f64 / 1e6 / ms;
        println!(
            "{} MB: write_buffer call {:.2} ms, upload to done {:.2} ms ({:.1} GB/s); copy to the staging buffer {:.2} ms; \
             map {:.2} ms; copy out of the mapped range {:.2} ms ({:.1} GB/s); a host memcpy of as much {:.2} ms ({:.1} GB/s)",
            bytes / 1_000_000,
            median(0),
            median(1),
            gb(median(1)),
            median(2),
            median(3),
            median(4),
            gb(median(4)),
            median(5),
            gb(median(5)),
        );
    });
}
