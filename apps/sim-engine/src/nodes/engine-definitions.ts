/** Node definitions as GET /object_info reports them on ComfyUI 0.3.64 (from the recorded object_info_full.json). */
import type { NodeDefinition } from '#libs/engine-protocol';

export const ENGINE_NODE_DEFINITIONS: Record<string, NodeDefinition> = {
 "CheckpointLoaderSimple": {
  "input": {
   "required": {
    "ckpt_name": [
     [],
     {
      "tooltip": "The name of the checkpoint (model) to load."
     }
    ]
   }
  },
  "input_order": {
   "required": [
    "ckpt_name"
   ]
  },
  "output": [
   "MODEL",
   "CLIP",
   "VAE"
  ],
  "output_is_list": [
   false,
   false,
   false
  ],
  "output_name": [
   "MODEL",
   "CLIP",
   "VAE"
  ],
  "name": "CheckpointLoaderSimple",
  "display_name": "Load Checkpoint",
  "python_module": "nodes",
  "category": "loaders",
  "output_node": false
 },
 "CLIPTextEncode": {
  "input": {
   "required": {
    "text": [
     "STRING",
     {
      "multiline": true,
      "dynamicPrompts": true
     }
    ],
    "clip": [
     "CLIP",
     {}
    ]
   }
  },
  "input_order": {
   "required": [
    "text",
    "clip"
   ]
  },
  "output": [
   "CONDITIONING"
  ],
  "output_is_list": [
   false
  ],
  "output_name": [
   "CONDITIONING"
  ],
  "name": "CLIPTextEncode",
  "display_name": "CLIP Text Encode (Prompt)",
  "python_module": "nodes",
  "category": "conditioning",
  "output_node": false
 },
 "EmptyLatentImage": {
  "input": {
   "required": {
    "width": [
     "INT",
     {
      "default": 512,
      "min": 16,
      "max": 16384,
      "step": 8
     }
    ],
    "height": [
     "INT",
     {
      "default": 512,
      "min": 16,
      "max": 16384,
      "step": 8
     }
    ],
    "batch_size": [
     "INT",
     {
      "default": 1,
      "min": 1,
      "max": 4096
     }
    ]
   }
  },
  "input_order": {
   "required": [
    "width",
    "height",
    "batch_size"
   ]
  },
  "output": [
   "LATENT"
  ],
  "output_is_list": [
   false
  ],
  "output_name": [
   "LATENT"
  ],
  "name": "EmptyLatentImage",
  "display_name": "Empty Latent Image",
  "python_module": "nodes",
  "category": "latent",
  "output_node": false
 },
 "KSampler": {
  "input": {
   "required": {
    "model": [
     "MODEL",
     {}
    ],
    "seed": [
     "INT",
     {
      "default": 0,
      "min": 0,
      "max": 18446744073709551615n,
      "control_after_generate": true
     }
    ],
    "steps": [
     "INT",
     {
      "default": 20,
      "min": 1,
      "max": 10000
     }
    ],
    "cfg": [
     "FLOAT",
     {
      "default": 8.0,
      "min": 0.0,
      "max": 100.0,
      "step": 0.1,
      "round": 0.01
     }
    ],
    "sampler_name": [
     [
      "euler",
      "euler_cfg_pp",
      "euler_ancestral",
      "euler_ancestral_cfg_pp",
      "heun",
      "heunpp2",
      "dpm_2",
      "dpm_2_ancestral",
      "lms",
      "dpm_fast",
      "dpm_adaptive",
      "dpmpp_2s_ancestral",
      "dpmpp_2s_ancestral_cfg_pp",
      "dpmpp_sde",
      "dpmpp_sde_gpu",
      "dpmpp_2m",
      "dpmpp_2m_cfg_pp",
      "dpmpp_2m_sde",
      "dpmpp_2m_sde_gpu",
      "dpmpp_2m_sde_heun",
      "dpmpp_2m_sde_heun_gpu",
      "dpmpp_3m_sde",
      "dpmpp_3m_sde_gpu",
      "ddpm",
      "lcm",
      "ipndm",
      "ipndm_v",
      "deis",
      "res_multistep",
      "res_multistep_cfg_pp",
      "res_multistep_ancestral",
      "res_multistep_ancestral_cfg_pp",
      "gradient_estimation",
      "gradient_estimation_cfg_pp",
      "er_sde",
      "seeds_2",
      "seeds_3",
      "sa_solver",
      "sa_solver_pece",
      "ddim",
      "uni_pc",
      "uni_pc_bh2"
     ],
     {}
    ],
    "scheduler": [
     [
      "simple",
      "sgm_uniform",
      "karras",
      "exponential",
      "ddim_uniform",
      "beta",
      "normal",
      "linear_quadratic",
      "kl_optimal"
     ],
     {}
    ],
    "positive": [
     "CONDITIONING",
     {}
    ],
    "negative": [
     "CONDITIONING",
     {}
    ],
    "latent_image": [
     "LATENT",
     {}
    ],
    "denoise": [
     "FLOAT",
     {
      "default": 1.0,
      "min": 0.0,
      "max": 1.0,
      "step": 0.01
     }
    ]
   }
  },
  "input_order": {
   "required": [
    "model",
    "seed",
    "steps",
    "cfg",
    "sampler_name",
    "scheduler",
    "positive",
    "negative",
    "latent_image",
    "denoise"
   ]
  },
  "output": [
   "LATENT"
  ],
  "output_is_list": [
   false
  ],
  "output_name": [
   "LATENT"
  ],
  "name": "KSampler",
  "display_name": "KSampler",
  "python_module": "nodes",
  "category": "sampling",
  "output_node": false
 },
 "VAEDecode": {
  "input": {
   "required": {
    "samples": [
     "LATENT",
     {}
    ],
    "vae": [
     "VAE",
     {}
    ]
   }
  },
  "input_order": {
   "required": [
    "samples",
    "vae"
   ]
  },
  "output": [
   "IMAGE"
  ],
  "output_is_list": [
   false
  ],
  "output_name": [
   "IMAGE"
  ],
  "name": "VAEDecode",
  "display_name": "VAE Decode",
  "python_module": "nodes",
  "category": "latent",
  "output_node": false
 },
 "SaveImage": {
  "input": {
   "required": {
    "images": [
     "IMAGE",
     {
      "tooltip": "The images to save."
     }
    ],
    "filename_prefix": [
     "STRING",
     {
      "default": "ComfyUI"
     }
    ]
   },
   "hidden": {
    "prompt": "PROMPT",
    "extra_pnginfo": "EXTRA_PNGINFO"
   }
  },
  "input_order": {
   "required": [
    "images",
    "filename_prefix"
   ],
   "hidden": [
    "prompt",
    "extra_pnginfo"
   ]
  },
  "output": [],
  "output_is_list": [],
  "output_name": [],
  "name": "SaveImage",
  "display_name": "Save Image",
  "python_module": "nodes",
  "category": "image",
  "output_node": true
 },
 "PreviewImage": {
  "input": {
   "required": {
    "images": [
     "IMAGE"
    ]
   },
   "hidden": {
    "prompt": "PROMPT",
    "extra_pnginfo": "EXTRA_PNGINFO"
   }
  },
  "input_order": {
   "required": [
    "images"
   ],
   "hidden": [
    "prompt",
    "extra_pnginfo"
   ]
  },
  "output": [],
  "output_is_list": [],
  "output_name": [],
  "name": "PreviewImage",
  "display_name": "Preview Image",
  "python_module": "nodes",
  "category": "image",
  "output_node": true
 },
 "LoadImage": {
  "input": {
   "required": {
    "image": [
     [],
     {
      "image_upload": true
     }
    ]
   }
  },
  "input_order": {
   "required": [
    "image"
   ]
  },
  "output": [
   "IMAGE",
   "MASK"
  ],
  "output_is_list": [
   false,
   false
  ],
  "output_name": [
   "IMAGE",
   "MASK"
  ],
  "name": "LoadImage",
  "display_name": "Load Image",
  "python_module": "nodes",
  "category": "image",
  "output_node": false
 },
 "LoadImageMask": {
  "input": {
   "required": {
    "image": [
     [],
     {
      "image_upload": true
     }
    ],
    "channel": [
     [
      "alpha",
      "red",
      "green",
      "blue"
     ]
    ]
   }
  },
  "input_order": {
   "required": [
    "image",
    "channel"
   ]
  },
  "output": [
   "MASK"
  ],
  "output_is_list": [
   false
  ],
  "output_name": [
   "MASK"
  ],
  "name": "LoadImageMask",
  "display_name": "Load Image (as Mask)",
  "python_module": "nodes",
  "category": "mask",
  "output_node": false
 },
 "ImageScale": {
  "input": {
   "required": {
    "image": [
     "IMAGE"
    ],
    "upscale_method": [
     [
      "nearest-exact",
      "bilinear",
      "area",
      "bicubic",
      "lanczos"
     ]
    ],
    "width": [
     "INT",
     {
      "default": 512,
      "min": 0,
      "max": 16384,
      "step": 1
     }
    ],
    "height": [
     "INT",
     {
      "default": 512,
      "min": 0,
      "max": 16384,
      "step": 1
     }
    ],
    "crop": [
     [
      "disabled",
      "center"
     ]
    ]
   }
  },
  "input_order": {
   "required": [
    "image",
    "upscale_method",
    "width",
    "height",
    "crop"
   ]
  },
  "output": [
   "IMAGE"
  ],
  "output_is_list": [
   false
  ],
  "output_name": [
   "IMAGE"
  ],
  "name": "ImageScale",
  "display_name": "Upscale Image",
  "python_module": "nodes",
  "category": "image/upscaling",
  "output_node": false
 },
 "ImageInvert": {
  "input": {
   "required": {
    "image": [
     "IMAGE"
    ]
   }
  },
  "input_order": {
   "required": [
    "image"
   ]
  },
  "output": [
   "IMAGE"
  ],
  "output_is_list": [
   false
  ],
  "output_name": [
   "IMAGE"
  ],
  "name": "ImageInvert",
  "display_name": "Invert Image",
  "python_module": "nodes",
  "category": "image",
  "output_node": false
 },
 "EmptyImage": {
  "input": {
   "required": {
    "width": [
     "INT",
     {
      "default": 512,
      "min": 1,
      "max": 16384,
      "step": 1
     }
    ],
    "height": [
     "INT",
     {
      "default": 512,
      "min": 1,
      "max": 16384,
      "step": 1
     }
    ],
    "batch_size": [
     "INT",
     {
      "default": 1,
      "min": 1,
      "max": 4096
     }
    ],
    "color": [
     "INT",
     {
      "default": 0,
      "min": 0,
      "max": 16777215,
      "step": 1,
      "display": "color"
     }
    ]
   }
  },
  "input_order": {
   "required": [
    "width",
    "height",
    "batch_size",
    "color"
   ]
  },
  "output": [
   "IMAGE"
  ],
  "output_is_list": [
   false
  ],
  "output_name": [
   "IMAGE"
  ],
  "name": "EmptyImage",
  "display_name": "EmptyImage",
  "python_module": "nodes",
  "category": "image",
  "output_node": false
 },
 "ImageBlur": {
  "input": {
   "required": {
    "image": [
     "IMAGE",
     {}
    ],
    "blur_radius": [
     "INT",
     {
      "default": 1,
      "min": 1,
      "max": 31,
      "step": 1
     }
    ],
    "sigma": [
     "FLOAT",
     {
      "default": 1.0,
      "min": 0.1,
      "max": 10.0,
      "step": 0.1
     }
    ]
   }
  },
  "input_order": {
   "required": [
    "image",
    "blur_radius",
    "sigma"
   ]
  },
  "output": [
   "IMAGE"
  ],
  "output_is_list": [
   false
  ],
  "output_name": [
   "IMAGE"
  ],
  "name": "ImageBlur",
  "display_name": null,
  "python_module": "comfy_extras.nodes_post_processing",
  "category": "image/postprocessing",
  "output_node": false,
  "deprecated": false,
  "experimental": false,
  "api_node": false
 },
 "SaveImageWebsocket": {
  "input": {
   "required": {
    "images": [
     "IMAGE"
    ]
   }
  },
  "input_order": {
   "required": [
    "images"
   ]
  },
  "output": [],
  "output_is_list": [],
  "output_name": [],
  "name": "SaveImageWebsocket",
  "display_name": "SaveImageWebsocket",
  "python_module": "custom_nodes.websocket_image_save",
  "category": "api/image",
  "output_node": true
 },
 "PrimitiveString": {
  "input": {
   "required": {
    "value": [
     "STRING",
     {
      "multiline": false
     }
    ]
   }
  },
  "input_order": {
   "required": [
    "value"
   ]
  },
  "output": [
   "STRING"
  ],
  "output_is_list": [
   false
  ],
  "output_name": [
   "STRING"
  ],
  "name": "PrimitiveString",
  "display_name": "String",
  "python_module": "comfy_extras.nodes_primitive",
  "category": "utils/primitive",
  "output_node": false,
  "deprecated": false,
  "experimental": false,
  "api_node": false
 },
 "PrimitiveInt": {
  "input": {
   "required": {
    "value": [
     "INT",
     {
      "min": -9223372036854775807n,
      "max": 9223372036854775807n,
      "control_after_generate": true
     }
    ]
   }
  },
  "input_order": {
   "required": [
    "value"
   ]
  },
  "output": [
   "INT"
  ],
  "output_is_list": [
   false
  ],
  "output_name": [
   "INT"
  ],
  "name": "PrimitiveInt",
  "display_name": "Int",
  "python_module": "comfy_extras.nodes_primitive",
  "category": "utils/primitive",
  "output_node": false,
  "deprecated": false,
  "experimental": false,
  "api_node": false
 },
 "StringConcatenate": {
  "input": {
   "required": {
    "string_a": [
     "STRING",
     {
      "multiline": true
     }
    ],
    "string_b": [
     "STRING",
     {
      "multiline": true
     }
    ],
    "delimiter": [
     "STRING",
     {
      "default": "",
      "multiline": false
     }
    ]
   }
  },
  "input_order": {
   "required": [
    "string_a",
    "string_b",
    "delimiter"
   ]
  },
  "output": [
   "STRING"
  ],
  "output_is_list": [
   false
  ],
  "output_name": [
   "STRING"
  ],
  "name": "StringConcatenate",
  "display_name": "Concatenate",
  "python_module": "comfy_extras.nodes_string",
  "category": "utils/string",
  "output_node": false,
  "deprecated": false,
  "experimental": false,
  "api_node": false
 },
 "StringLength": {
  "input": {
   "required": {
    "string": [
     "STRING",
     {
      "multiline": true
     }
    ]
   }
  },
  "input_order": {
   "required": [
    "string"
   ]
  },
  "output": [
   "INT"
  ],
  "output_is_list": [
   false
  ],
  "output_name": [
   "length"
  ],
  "name": "StringLength",
  "display_name": "Length",
  "python_module": "comfy_extras.nodes_string",
  "category": "utils/string",
  "output_node": false,
  "deprecated": false,
  "experimental": false,
  "api_node": false
 },
 "PreviewAny": {
  "input": {
   "required": {
    "source": [
     "*",
     {}
    ]
   }
  },
  "input_order": {
   "required": [
    "source"
   ]
  },
  "output": [],
  "output_is_list": [],
  "output_name": [],
  "name": "PreviewAny",
  "display_name": "Preview Any",
  "python_module": "comfy_extras.nodes_preview_any",
  "category": "utils",
  "output_node": true
 },
 "SaveAnimatedPNG": {
  "input": {
   "required": {
    "images": [
     "IMAGE"
    ],
    "filename_prefix": [
     "STRING",
     {
      "default": "ComfyUI"
     }
    ],
    "fps": [
     "FLOAT",
     {
      "default": 6.0,
      "min": 0.01,
      "max": 1000.0,
      "step": 0.01
     }
    ],
    "compress_level": [
     "INT",
     {
      "default": 4,
      "min": 0,
      "max": 9
     }
    ]
   },
   "hidden": {
    "prompt": "PROMPT",
    "extra_pnginfo": "EXTRA_PNGINFO"
   }
  },
  "input_order": {
   "required": [
    "images",
    "filename_prefix",
    "fps",
    "compress_level"
   ],
   "hidden": [
    "prompt",
    "extra_pnginfo"
   ]
  },
  "output": [],
  "output_is_list": [],
  "output_name": [],
  "name": "SaveAnimatedPNG",
  "display_name": "SaveAnimatedPNG",
  "python_module": "comfy_extras.nodes_images",
  "category": "image/animation",
  "output_node": true
 },
 "SaveAudio": {
  "input": {
   "required": {
    "audio": [
     "AUDIO"
    ],
    "filename_prefix": [
     "STRING",
     {
      "default": "audio/ComfyUI"
     }
    ]
   },
   "hidden": {
    "prompt": "PROMPT",
    "extra_pnginfo": "EXTRA_PNGINFO"
   }
  },
  "input_order": {
   "required": [
    "audio",
    "filename_prefix"
   ],
   "hidden": [
    "prompt",
    "extra_pnginfo"
   ]
  },
  "output": [],
  "output_is_list": [],
  "output_name": [],
  "name": "SaveAudio",
  "display_name": "Save Audio (FLAC)",
  "python_module": "comfy_extras.nodes_audio",
  "category": "audio",
  "output_node": true
 },
 "PreviewAudio": {
  "input": {
   "required": {
    "audio": [
     "AUDIO"
    ]
   },
   "hidden": {
    "prompt": "PROMPT",
    "extra_pnginfo": "EXTRA_PNGINFO"
   }
  },
  "input_order": {
   "required": [
    "audio"
   ],
   "hidden": [
    "prompt",
    "extra_pnginfo"
   ]
  },
  "output": [],
  "output_is_list": [],
  "output_name": [],
  "name": "PreviewAudio",
  "display_name": "Preview Audio",
  "python_module": "comfy_extras.nodes_audio",
  "category": "audio",
  "output_node": true
 },
 "LoadAudio": {
  "input": {
   "required": {
    "audio": [
     [],
     {
      "audio_upload": true
     }
    ]
   }
  },
  "input_order": {
   "required": [
    "audio"
   ]
  },
  "output": [
   "AUDIO"
  ],
  "output_is_list": [
   false
  ],
  "output_name": [
   "AUDIO"
  ],
  "name": "LoadAudio",
  "display_name": "Load Audio",
  "python_module": "comfy_extras.nodes_audio",
  "category": "audio",
  "output_node": false
 },
 "LoraLoader": {
  "input": {
   "required": {
    "model": [
     "MODEL",
     {}
    ],
    "clip": [
     "CLIP",
     {}
    ],
    "lora_name": [
     [],
     {}
    ],
    "strength_model": [
     "FLOAT",
     {
      "default": 1.0,
      "min": -100.0,
      "max": 100.0,
      "step": 0.01
     }
    ],
    "strength_clip": [
     "FLOAT",
     {
      "default": 1.0,
      "min": -100.0,
      "max": 100.0,
      "step": 0.01
     }
    ]
   }
  },
  "input_order": {
   "required": [
    "model",
    "clip",
    "lora_name",
    "strength_model",
    "strength_clip"
   ]
  },
  "output": [
   "MODEL",
   "CLIP"
  ],
  "output_is_list": [
   false,
   false
  ],
  "output_name": [
   "MODEL",
   "CLIP"
  ],
  "name": "LoraLoader",
  "display_name": "Load LoRA",
  "python_module": "nodes",
  "category": "loaders",
  "output_node": false
 },
 "LoraLoaderModelOnly": {
  "input": {
   "required": {
    "model": [
     "MODEL"
    ],
    "lora_name": [
     []
    ],
    "strength_model": [
     "FLOAT",
     {
      "default": 1.0,
      "min": -100.0,
      "max": 100.0,
      "step": 0.01
     }
    ]
   }
  },
  "input_order": {
   "required": [
    "model",
    "lora_name",
    "strength_model"
   ]
  },
  "output": [
   "MODEL"
  ],
  "output_is_list": [
   false
  ],
  "output_name": [
   "MODEL"
  ],
  "name": "LoraLoaderModelOnly",
  "display_name": "LoraLoaderModelOnly",
  "python_module": "nodes",
  "category": "loaders",
  "output_node": false
 },
 "VAELoader": {
  "input": {
   "required": {
    "vae_name": [
     [
      "pixel_space"
     ]
    ]
   }
  },
  "input_order": {
   "required": [
    "vae_name"
   ]
  },
  "output": [
   "VAE"
  ],
  "output_is_list": [
   false
  ],
  "output_name": [
   "VAE"
  ],
  "name": "VAELoader",
  "display_name": "Load VAE",
  "python_module": "nodes",
  "category": "loaders",
  "output_node": false
 },
 "CLIPLoader": {
  "input": {
   "required": {
    "clip_name": [
     []
    ],
    "type": [
     [
      "stable_diffusion",
      "stable_cascade",
      "sd3",
      "stable_audio",
      "mochi",
      "ltxv",
      "pixart",
      "cosmos",
      "lumina2",
      "wan",
      "hidream",
      "chroma",
      "ace",
      "omnigen2",
      "qwen_image",
      "hunyuan_image"
     ]
    ]
   },
   "optional": {
    "device": [
     [
      "default",
      "cpu"
     ],
     {
      "advanced": true
     }
    ]
   }
  },
  "input_order": {
   "required": [
    "clip_name",
    "type"
   ],
   "optional": [
    "device"
   ]
  },
  "output": [
   "CLIP"
  ],
  "output_is_list": [
   false
  ],
  "output_name": [
   "CLIP"
  ],
  "name": "CLIPLoader",
  "display_name": "Load CLIP",
  "python_module": "nodes",
  "category": "advanced/loaders",
  "output_node": false
 },
 "UNETLoader": {
  "input": {
   "required": {
    "unet_name": [
     []
    ],
    "weight_dtype": [
     [
      "default",
      "fp8_e4m3fn",
      "fp8_e4m3fn_fast",
      "fp8_e5m2"
     ]
    ]
   }
  },
  "input_order": {
   "required": [
    "unet_name",
    "weight_dtype"
   ]
  },
  "output": [
   "MODEL"
  ],
  "output_is_list": [
   false
  ],
  "output_name": [
   "MODEL"
  ],
  "name": "UNETLoader",
  "display_name": "Load Diffusion Model",
  "python_module": "nodes",
  "category": "advanced/loaders",
  "output_node": false
 }
};
