// Scratch (issue 24): where the end-to-end time of a large product goes on
// this adapter. Times, each the median of five rounds after a warm-up:
// the round trip of a one-element read (submit, wait, map); an upload (a
// host array made a tensor, one element of it read: less the round trip);
// a read (a fresh elementwise result read back whole: less the round
// trip); the product alone (resident operands, one element read); and the
// whole end-to-end iteration of `W2 matmul N`.
use std::time::Instant;
use webfusion::Device;

fn median(f: &mut dyn FnMut() -> f64) -> f64 {
    let _ = f();
    let mut times: Vec<f64> = (0..5).map(|_| f()).collect();
    times.sort_by(f64::total_cmp);
    times[2]
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1024, 4096]
    } else {
        sizes
    };
    pollster::block_on(async {
        let gpu = Device::request(Default::default()).await.unwrap();
        println!("adapter: {}", gpu.adapter_info());
        for n in sizes {
            let host: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 - 3.0).collect();
            let b = gpu.random_uniform(&[n, n], -1.0, 1.0, 3).unwrap();
            let resident = b.add(1.0).unwrap();
            gpu.sync().await.unwrap();
            let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
            let corner = resident.slice(&[0, 0], &[1, 1]).unwrap();
            let round_trip = median(&mut || {
                let t = Instant::now();
                let v = pollster::block_on(corner.add(0.0).unwrap().to_vec()).unwrap();
                assert_eq!(v.len(), 1);
                ms(t)
            });
            let upload = median(&mut || {
                let t = Instant::now();
                let a = gpu.tensor(&host, Some(&[n, n])).unwrap();
                let c = a.slice(&[0, 0], &[1, 1]).unwrap().add(0.0).unwrap();
                let _ = pollster::block_on(c.to_vec()).unwrap();
                ms(t)
            }) - round_trip;
            let read = median(&mut || {
                let t = Instant::now();
                let v = pollster::block_on(b.add(2.0).unwrap().to_vec()).unwrap();
                assert_eq!(v.len(), n * n);
                ms(t)
            }) - round_trip;
            let product = median(&mut || {
                let t = Instant::now();
                let c = resident
                    .matmul(&b)
                    .unwrap()
                    .slice(&[0, 0], &[1, 1])
                    .unwrap();
                let _ = pollster::block_on(c.to_vec()).unwrap();
                ms(t)
            });
            let end_to_end = median(&mut || {
                let t = Instant::now();
                let a = gpu.tensor(&host, Some(&[n, n])).unwrap();
                let v = pollster::block_on(a.matmul(&b).unwrap().to_vec()).unwrap();
                assert_eq!(v.len(), n * n);
                ms(t)
            });
            let mb = (n * n * 4) as f64 / 1e6;
            println!(
                "n {n} ({mb:.0} MB): upload {upload:.2} ms ({:.1} GB/s), read {read:.2} ms ({:.1} GB/s), \
                 one-element round trip {round_trip:.3} ms, product {product:.2} ms, end to end {end_to_end:.2} ms",
                mb / upload,
                mb / read
            );
        }
    });
}
