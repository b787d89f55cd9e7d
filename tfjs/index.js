// `import 'webfusion/tfjs'` registers webfusion as a TF.js backend named
// 'webfusion' (`await tf.setBackend('webfusion')` selects it) and its
// kernels. Its priority is low on purpose: importing it changes no
// program's backend until the program asks for it.
import { registerBackend, registerKernel } from '@tensorflow/tfjs-core';
import { createBackend, WebfusionBackend } from './backend.js';
import { kernels } from './kernels.js';

export const BACKEND_NAME = 'webfusion';

registerBackend(BACKEND_NAME, () => createBackend(), 1);
for (const [kernelName, kernelFunc] of Object.entries(kernels)) {
  registerKernel({ kernelName, backendName: BACKEND_NAME, kernelFunc });
}

export { createBackend, WebfusionBackend, kernels };
