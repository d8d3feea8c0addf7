! adaptyst-top task API for Fortran: the C symbols of adaptyst_task.h, bound with
! ISO_C_BINDING. Compile one C file with ADAPTYST_TASK_IMPLEMENTATION defined and
! this module, then:
!
!     use adaptyst_task
!     type(adaptyst_task_t) :: t
!     call adaptyst_task_begin(t, "spmv"//c_null_char, "cpu"//c_null_char, nnz, density)
!     ...
!     call adaptyst_task_end(t)
!
! Strings must end in c_null_char; size is integer(c_long_long); feature is real(c_double),
! negative for none.
module adaptyst_task
    use, intrinsic :: iso_c_binding
    implicit none
    private
    public :: adaptyst_task_t, adaptyst_task_begin, adaptyst_task_end

    type, bind(c) :: adaptyst_task_t
        character(kind=c_char) :: key(32)
        integer(c_long_long) :: size
    end type adaptyst_task_t

    interface
        subroutine adaptyst_task_begin(t, task, device, size, feature) &
                bind(c, name="adaptyst_task_begin_c")
            import :: adaptyst_task_t, c_char, c_long_long, c_double
            type(adaptyst_task_t), intent(out) :: t
            character(kind=c_char), intent(in) :: task(*), device(*)
            integer(c_long_long), value :: size
            real(c_double), value :: feature
        end subroutine adaptyst_task_begin

        subroutine adaptyst_task_end(t) bind(c, name="adaptyst_task_end_c")
            import :: adaptyst_task_t
            type(adaptyst_task_t), intent(in) :: t
        end subroutine adaptyst_task_end
    end interface
end module adaptyst_task
