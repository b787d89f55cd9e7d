// Scratch: times each pass of W8's convolutions and pools on this adapter.
use std::time::Instant;
use webfusion::{DataFormat, Device, Padding, Tensor};

fn main() {
    pollster::block_on(async {
        let gpu = Device::request(Default::default()).await.unwrap();
        let t = |shape: &[usize]| {
            let n: usize = shape.iter().product();
            gpu.tensor(&vec![0.5f32; n], Some(shape)).unwrap()
        };
        let x1 = t(&[64, 28, 28, 1]);
        let f1 = t(&[5, 5, 1, 8]);
        let x2 = t(&[64, 12, 12, 8]);
        let f2 = t(&[5, 5, 8, 16]);
        let dy1 = t(&[64, 24, 24, 8]);
        let dy2 = t(&[64, 8, 8, 16]);
        let run = |name: &str, f: &dyn Fn() -> Tensor| {
            for round in 0..3 {
                let t0 = Instant::now();
                let y = f();
                let _ = pollster::block_on(y.to_vec());
                if round == 2 {
                    println!("{name}: {:.1} ms", t0.elapsed().as_secs_f64() * 1e3);
                }
            }
        };
        run("relu of conv1's output (baseline)", &|| dy1.relu().unwrap());
        let xd = t(&[64, 28, 28, 8]);
        let fd = t(&[5, 5, 8, 1]);
        run("depthwise 64x28x28x8 5x5 (7.4M MACs)", &|| {
            xd.depthwise_conv2d(&fd, [1, 1], Padding::Valid, DataFormat::Nhwc, [1, 1])
                .unwrap()
        });
        run("conv1 forward", &|| {
            x1.conv2d(&f1, [1, 1], Padding::Valid, DataFormat::Nhwc, [1, 1])
                .unwrap()
        });
        run("conv2 forward", &|| {
            x2.conv2d(&f2, [1, 1], Padding::Valid, DataFormat::Nhwc, [1, 1])
                .unwrap()
        });
        run("conv2 input grad", &|| {
            dy2.conv2d_transpose(&f2, &[64, 12, 12, 8], [1, 1], Padding::Valid)
                .unwrap()
        });
        run("pool1", &|| {
            dy1.max_pool([2, 2], [2, 2], Padding::Valid).unwrap()
        });
        run("conv1 filter grad", &|| {
            gpu.grad(
                |f| {
                    x1.conv2d(f, [1, 1], Padding::Valid, DataFormat::Nhwc, [1, 1])?
                        .mul(&dy1)?
                        .sum(None, false)
                },
                &f1,
                None,
            )
            .unwrap()
        });
        run("conv2 filter grad", &|| {
            gpu.grad(
                |f| {
                    x2.conv2d(f, [1, 1], Padding::Valid, DataFormat::Nhwc, [1, 1])?
                        .mul(&dy2)?
                        .sum(None, false)
                },
                &f2,
                None,
            )
            .unwrap()
        });
        run("pool1 grad", &|| {
            gpu.grad(
                |x| x.max_pool([2, 2], [2, 2], Padding::Valid)?.sum(None, false),
                &dy1,
                None,
            )
            .unwrap()
        });
    });
}
