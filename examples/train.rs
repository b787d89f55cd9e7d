//! Training natively: an MLP learns XOR with Adam, then a step is broken
//! on purpose (an injected GPU fault) and changes nothing:
//! `cargo run --example train` (any Vulkan device: lavapipe will do).

use webfusion::{Device, DeviceOptions, FaultKind, Optimizer, RegistrationError, Tensor, Variable};

fn main() {
    pollster::block_on(async {
        let gpu = match Device::request(DeviceOptions::default()).await {
            Ok(gpu) => gpu,
            Err(error) => return eprintln!("no GPU device: {error}"),
        };
        if let Err(error) = train(&gpu).await {
            eprintln!("{error}");
        }
    });
}

async fn train(gpu: &Device) -> Result<(), Box<dyn std::error::Error>> {
    let x = gpu.tensor(&[0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0], Some(&[4, 2]))?;
    let y = gpu.tensor(&[0.0, 1.0, 1.0, 0.0], Some(&[4, 1]))?;
    let w1 = gpu.variable(&gpu.random_normal(&[2, 8], 0.0, 1.0, 1)?, true, Some("w1"))?;
    let b1 = gpu.variable(&gpu.zeros(&[8])?, true, Some("b1"))?;
    let w2 = gpu.variable(&gpu.random_normal(&[8, 1], 0.0, 1.0, 2)?, true, Some("w2"))?;
    let b2 = gpu.variable(&gpu.zeros(&[1])?, true, Some("b2"))?;
    let vars = [w1.clone(), b1.clone(), w2.clone(), b2.clone()];
    // Mean squared error of a 2-8-1 network with biases, tanh then sigmoid.
    let loss = |[w1, b1, w2, b2]: &[Variable; 4]| -> Result<Tensor, RegistrationError> {
        let hidden = x.matmul(&w1.value())?.add(&b1.value())?.tanh()?;
        let out = hidden.matmul(&w2.value())?.add(&b2.value())?.sigmoid()?;
        out.sub(&y)?.square()?.mean(None, false)
    };
    let mut adam = Optimizer::adam(0.05, 0.9, 0.999, 1e-7)?;
    for step in 1..=300 {
        let cost = adam.minimize(|| loss(&vars), true, Some(&vars))?;
        if let (0, Some(cost)) = (step % 100, cost) {
            // Each read runs the steps queued since the last one, fused.
            println!("step {step}: cost {:?}", cost.to_vec().await?);
        }
    }

    // A step that fails (a GPU fault in its first matmul) changes nothing.
    let before = w1.value().to_vec().await?;
    gpu.inject_fault("matmul", 1, FaultKind::Validation)?;
    let failed = adam.minimize(|| loss(&vars), true, Some(&vars))?;
    if let Some(cost) = failed {
        match cost.to_vec().await {
            Ok(values) => println!("unexpected: {values:?}"),
            Err(error) => println!(
                "the broken step's cost: {}",
                error.first().map_or("?", |r| r.root.op.as_str())
            ),
        }
    }
    assert_eq!(
        w1.value().to_vec().await?,
        before,
        "a failed step changes no variable"
    );
    println!("w1 is unchanged after the failed step");
    Ok(())
}
