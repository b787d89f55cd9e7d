// The TF.js backend's declarations, as a strict TypeScript user of TF.js
// meets them (`webfusion/tfjs`).
import * as tf from '@tensorflow/tfjs-core';
import { BACKEND_NAME, WebfusionBackend, createBackend, kernels } from 'webfusion/tfjs';
import type { Stats } from 'webfusion';

const name: 'webfusion' = BACKEND_NAME;
await tf.setBackend(name);
tf.registerBackend('webfusion-kernels', () => createBackend({ hostMaxElements: 0 }));
const backend = tf.backend() as WebfusionBackend;
const stats: Stats = backend.device.stats();
const registered: number = Object.keys(kernels).length + stats.kernelsLaunched;

// @ts-expect-error the options are Device.request's, and this key is misspelt
createBackend({ hostMaxElement: 0 });

export { registered };
