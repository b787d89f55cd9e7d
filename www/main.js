import init, { Device } from 'webfusion';

const show = (id, text) => { document.getElementById(id).textContent = text; };

try {
  await init();
  const gpu = await Device.request();
  const t = gpu.tensor([1, 2, 3]).add(gpu.tensor([10, 20, 30])).mul(2);
  show('shape', JSON.stringify(t.shape));
  const values = await t.data();
  show('result', Array.from(values).join(','));
  document.body.dataset.state = 'done';
} catch (error) {
  const result = document.getElementById('result');
  result.className = 'error';
  result.textContent = `${error.name}: ${error.message}`;
  document.body.dataset.state = 'failed';
}
