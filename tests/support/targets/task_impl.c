/* The C symbols the Fortran module binds: one file defines them. */
#define ADAPTYST_TASK_IMPLEMENTATION
#include "adaptyst_task.h"
