use webfusion::Device;
fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    pollster::block_on(async {
        let gpu = Device::request(Default::default()).await.unwrap();
        let n = 1024;
        let host: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 - 3.0).collect();
        let b = gpu.random_uniform(&[n, n], -1.0, 1.0, 3).unwrap();
        for _ in 0..300 {
            if mode == "up" {
                let a = gpu.tensor(&host, Some(&[n, n])).unwrap();
                let c = a.slice(&[0, 0], &[1, 1]).unwrap().add(0.0).unwrap();
                let _ = c.to_vec().await.unwrap();
            } else {
                let v = b.add(2.0).unwrap().to_vec().await.unwrap();
                assert_eq!(v.len(), n * n);
            }
        }
    });
}
