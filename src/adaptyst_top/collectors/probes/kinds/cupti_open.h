/* Which CUPTI the CUDA injection library (cuda_inject.c) loads: cupti_open.c. */
#ifndef ADAPTYST_CUPTI_OPEN_H
#define ADAPTYST_CUPTI_OPEN_H

/* A dlopen handle on a CUPTI for the program, or NULL; once, inside cuInit. */
void *open_cupti(void);

#endif
