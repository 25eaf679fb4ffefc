// A first script for the tiny-node sandbox: bluebox run <name> -- node hello.js
const os = require("os");

console.log(`hello from Node ${process.version} on kernel ${os.release()}`);
console.log(`working directory: ${process.cwd()} (only /data survives the run)`);
