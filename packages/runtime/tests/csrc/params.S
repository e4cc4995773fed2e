/* The weights of the test model, as the compiler's generated params.S embeds them. */
    .section .rodata
    .balign 64
    .globl tsm_params_blob
    .hidden tsm_params_blob
    .type tsm_params_blob, %object
tsm_params_blob:
    .incbin "params.bin"
    .size tsm_params_blob, . - tsm_params_blob
    .section .note.GNU-stack,"",%progbits
